package metrics

import (
	dto "github.com/prometheus/client_model/go"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeSource returns whatever the test put in it; it stands in for the broker.
type fakeSource struct {
	queues []QueueStat
	groups []GroupStat
	topics []TopicStat
}

func (f *fakeSource) QueueStats() []QueueStat { return f.queues }
func (f *fakeSource) GroupStats() []GroupStat { return f.groups }
func (f *fakeSource) TopicStats() []TopicStat { return f.topics }

func TestCollectorMapsQueueStats(t *testing.T) {
	src := &fakeSource{queues: []QueueStat{{
		Queue: "emails", Visible: 7, InFlight: 2, Delayed: 1, OldestAge: 90 * time.Second, DLQDepth: 3,
		Sent: 13, Received: 9, Acked: 4, Redelivered: 2, DeadLettered: 3, StaleAckRefused: 1, Lost: 5,
		RecoveredGap: 6,
	}}}
	want := `
# HELP sluice_queue_messages Messages in a queue by state: visible, inflight or delayed.
# TYPE sluice_queue_messages gauge
sluice_queue_messages{queue="emails",state="delayed"} 1
sluice_queue_messages{queue="emails",state="inflight"} 2
sluice_queue_messages{queue="emails",state="visible"} 7
# HELP sluice_queue_oldest_message_age_seconds Age of the oldest message not yet acked.
# TYPE sluice_queue_oldest_message_age_seconds gauge
sluice_queue_oldest_message_age_seconds{queue="emails"} 90
# HELP sluice_queue_dlq_depth Messages waiting in the queue's dead-letter queue.
# TYPE sluice_queue_dlq_depth gauge
sluice_queue_dlq_depth{queue="emails"} 3
# HELP sluice_queue_sent_total Messages sent to the queue.
# TYPE sluice_queue_sent_total counter
sluice_queue_sent_total{queue="emails"} 13
# HELP sluice_queue_received_total Deliveries made from the queue, redeliveries included.
# TYPE sluice_queue_received_total counter
sluice_queue_received_total{queue="emails"} 9
# HELP sluice_queue_acked_total Messages acked (deleted) with a current receipt.
# TYPE sluice_queue_acked_total counter
sluice_queue_acked_total{queue="emails"} 4
# HELP sluice_queue_redelivered_total Deliveries of a message that had been delivered before.
# TYPE sluice_queue_redelivered_total counter
sluice_queue_redelivered_total{queue="emails"} 2
# HELP sluice_queue_dead_lettered_total Messages moved to the dead-letter queue after max receives.
# TYPE sluice_queue_dead_lettered_total counter
sluice_queue_dead_lettered_total{queue="emails"} 3
# HELP sluice_queue_stale_ack_refused_total Acks, extends and nacks refused because the receipt was stale.
# TYPE sluice_queue_stale_ack_refused_total counter
sluice_queue_stale_ack_refused_total{queue="emails"} 1
# HELP sluice_queue_lost_total Messages lost because their records were in a damaged batch of the log (sluice admin corruption lists it).
# TYPE sluice_queue_lost_total counter
sluice_queue_lost_total{queue="emails"} 5
# HELP sluice_queue_recovered_gap_messages_total Messages found lost when the queue opened: its cursor journal knew offsets its message log had lost (a live file copy, a power cut under --fsync interval|never). The log goes on after them.
# TYPE sluice_queue_recovered_gap_messages_total counter
sluice_queue_recovered_gap_messages_total{queue="emails"} 6
`
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestCollectorMapsGroupAndTopicStats(t *testing.T) {
	src := &fakeSource{
		groups: []GroupStat{{Group: "billing", Topic: "orders", Partition: 2, LagMessages: 40, LagAge: 1500 * time.Millisecond}},
		topics: []TopicStat{{Topic: "orders", RetentionHeadroom: -time.Minute}},
	}
	want := `
# HELP sluice_group_lag_messages Records between a group's committed offset and the high watermark.
# TYPE sluice_group_lag_messages gauge
sluice_group_lag_messages{group="billing",partition="2",topic="orders"} 40
# HELP sluice_group_lag_seconds Age of the oldest record a group has not consumed.
# TYPE sluice_group_lag_seconds gauge
sluice_group_lag_seconds{group="billing",partition="2",topic="orders"} 1.5
# HELP sluice_topic_retention_headroom_seconds Time until retention deletes a record the slowest reader has not consumed; negative means loss.
# TYPE sluice_topic_retention_headroom_seconds gauge
sluice_topic_retention_headroom_seconds{topic="orders"} -60
`
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// A queue deleted between scrapes must vanish: nothing is cached.
func TestCollectorReadsSourceAtEachScrape(t *testing.T) {
	src := &fakeSource{queues: []QueueStat{{Queue: "a"}, {Queue: "b"}}}
	c := NewCollector(src)
	if n := testutil.CollectAndCount(c, "sluice_queue_sent_total"); n != 2 {
		t.Fatalf("first scrape: %d series, want 2", n)
	}
	src.queues = src.queues[:1]
	if n := testutil.CollectAndCount(c, "sluice_queue_sent_total"); n != 1 {
		t.Fatalf("after delete: %d series, want 1", n)
	}
}

func TestSourceFuncsNilReportsNothing(t *testing.T) {
	m := New("test")
	if err := m.RegisterSource(SourceFuncs{Queues: func() []QueueStat { return []QueueStat{{Queue: "q", Visible: 5}} }}); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(m.Registry(), "sluice_queue_messages", "sluice_group_lag_messages")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("got %d series, want 3 (one per queue state, no groups)", n)
	}
}

func TestHistogramsAndHandler(t *testing.T) {
	m := New("v1.2.3")
	m.ObserveRequest("connect", "QueueService/Send", 3*time.Millisecond)
	m.ObserveRequest("sqs", "SendMessage", time.Millisecond)
	m.ObserveFsync(200 * time.Microsecond)
	m.ObserveCommitBatch(17)
	m.RaftRounds()(400 * time.Millisecond)

	n, err := testutil.GatherAndCount(m.Registry(), "sluice_request_duration_seconds",
		"sluice_storage_fsync_duration_seconds", "sluice_storage_group_commit_batch_size",
		"sluice_raft_ready_round_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("got %d histogram series, want 5", n)
	}

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sluice_build_info{version="v1.2.3"} 1`,
		`sluice_request_duration_seconds_count{operation="QueueService/Send",protocol="connect"} 1`,
		`sluice_storage_group_commit_batch_size_sum 17`,
		`sluice_raft_ready_round_duration_seconds_bucket{le="0.2048"} 0`,
		`sluice_raft_ready_round_duration_seconds_bucket{le="0.4096"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// Registering two sources with the same descriptors is a programming error
// the registry reports rather than silently double-counting.
func TestRegisterSourceTwiceFails(t *testing.T) {
	m := New("test")
	if err := m.RegisterSource(&fakeSource{}); err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterSource(&fakeSource{}); err == nil {
		t.Fatal("second RegisterSource succeeded; want a duplicate-registration error")
	}
}

// Storage as a whole reaches /metrics when the source reports it.
func TestCollectorMapsStorage(t *testing.T) {
	src := SourceFuncs{Storage: func() StorageStat {
		return StorageStat{OpenFiles: 12, MaxOpenFiles: 512, FileEvictions: 3, CorruptBatches: 2, WriteFailing: true}
	}}
	want := `
# HELP sluice_storage_corrupt_batches_total Damaged batches found (checksum, length, framing) and quarantined: their offsets are skipped by every reader.
# TYPE sluice_storage_corrupt_batches_total counter
sluice_storage_corrupt_batches_total 2
# HELP sluice_storage_open_files File descriptors the logs hold open now (segment and index files, through one cache).
# TYPE sluice_storage_open_files gauge
sluice_storage_open_files 12
# HELP sluice_storage_write_failing 1 while the disk is full or answers I/O errors (sends are refused while full), else 0.
# TYPE sluice_storage_write_failing gauge
sluice_storage_write_failing 1
`
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(want),
		"sluice_storage_corrupt_batches_total", "sluice_storage_open_files", "sluice_storage_write_failing"); err != nil {
		t.Fatal(err)
	}
}

// A cluster node's Raft host is reported; a single node (Raft says false)
// reports none of its series rather than zeros that look like a stalled cluster.
func TestCollectorMapsRaft(t *testing.T) {
	st := RaftStat{Groups: 1001, Awake: 3, PeersDown: 1, NotPreferred: 4, GroupTicks: 70, Batches: 9, Messages: 40, VotesRefused: 2, TransportRefused: 20, StreamsOpened: 6, StreamsAccepted: 8,
		FeatureLevel: 1, ReadsFeatureLevel: 2, GroupStateTooLarge: true, DiskFull: true, DiskFullStalls: 3,
		SnapshotsCreated: 5, SnapshotBytes: 4096}
	cluster := true
	src := SourceFuncs{Raft: func() (RaftStat, bool) { return st, cluster }}
	want := `
# HELP sluice_raft_groups Raft groups this node hosts a replica of (the metadata group, one per partition and per queue).
# TYPE sluice_raft_groups gauge
sluice_raft_groups 1001
# HELP sluice_raft_groups_awake Hosted groups that tick (not quiesced): on an idle cluster this falls to about zero; a group that stays awake costs heartbeats.
# TYPE sluice_raft_groups_awake gauge
sluice_raft_groups_awake 3
# HELP sluice_raft_peers_down Peer nodes this node has not heard from within the node timeout (their groups elect leaders elsewhere).
# TYPE sluice_raft_peers_down gauge
sluice_raft_peers_down 1
# HELP sluice_raft_leaders_not_preferred Partitions and queues this node leads whose preferred leader (their first replica) is another node: what --cluster-leader-balance, Kafka's ElectLeaders or sluice cluster elect hands back (Kafka's PreferredReplicaImbalanceCount, per node).
# TYPE sluice_raft_leaders_not_preferred gauge
sluice_raft_leaders_not_preferred 4
# HELP sluice_raft_transport_messages_total Raft messages sent to peers, inside those batches.
# TYPE sluice_raft_transport_messages_total counter
sluice_raft_transport_messages_total 40
# HELP sluice_raft_transport_refused_total Connections to the cluster port refused: a failed TLS handshake, not a sluice peer, another cluster's, a node not admitted. Each is counted; the log warns of them at most once every 10 s.
# TYPE sluice_raft_transport_refused_total counter
sluice_raft_transport_refused_total 20
# HELP sluice_raft_transport_streams_opened_total Streams this node opened to peers over the cluster port to forward calls its TLS clients made (native API, SQS) to their leader.
# TYPE sluice_raft_transport_streams_opened_total counter
sluice_raft_transport_streams_opened_total 6
# HELP sluice_raft_transport_streams_accepted_total Streams peers opened to this node over the cluster port to forward calls their TLS clients made.
# TYPE sluice_raft_transport_streams_accepted_total counter
sluice_raft_transport_streams_accepted_total 8
# HELP sluice_raft_votes_refused_total Vote requests dropped because this replica was blank (a node on an empty disk, a replica not caught up): it must not vote with state it lacks.
# TYPE sluice_raft_votes_refused_total counter
sluice_raft_votes_refused_total 2
# HELP sluice_cluster_feature_level The cluster's feature level: which kinds of entry its logs may hold (docs/cluster.md, "Upgrades"). It rises once every node reads the next one; below sluice_cluster_reads_feature_level on every node, some node holds it back.
# TYPE sluice_cluster_feature_level gauge
sluice_cluster_feature_level 1
# HELP sluice_cluster_reads_feature_level The feature level this node tells the controller it reads: its binary's, or --cluster-max-feature-level.
# TYPE sluice_cluster_reads_feature_level gauge
sluice_cluster_reads_feature_level 2
# HELP sluice_cluster_group_state_too_large 1 when this node's last metadata snapshot could not carry the consumer groups' state (over 48 MiB): the metadata log is no longer compacted, and a follower that falls behind it lacks the groups (docs/cluster.md, "Compaction").
# TYPE sluice_cluster_group_state_too_large gauge
sluice_cluster_group_state_too_large 1
# HELP sluice_raft_disk_full 1 while this node's Raft groups wait for room on a full disk: they acknowledge nothing, and their other replicas carry on without this one (docs/cluster.md, "A full disk").
# TYPE sluice_raft_disk_full gauge
sluice_raft_disk_full 1
# HELP sluice_raft_disk_full_stalls_total Times this node's Raft groups had to wait for room on a full disk.
# TYPE sluice_raft_disk_full_stalls_total counter
sluice_raft_disk_full_stalls_total 3
# HELP sluice_raft_snapshots_created_total Snapshots of this node's replicas stored (each bounds what a restart re-applies and lets the Raft log be compacted).
# TYPE sluice_raft_snapshots_created_total counter
sluice_raft_snapshots_created_total 5
# HELP sluice_raft_snapshot_bytes_created_total Bytes of those snapshots: against the entries' bytes, what snapshots cost the disk (a clustered queue's snapshot holds its whole backlog).
# TYPE sluice_raft_snapshot_bytes_created_total counter
sluice_raft_snapshot_bytes_created_total 4096
`
	names := []string{"sluice_raft_groups", "sluice_raft_groups_awake", "sluice_raft_peers_down", "sluice_raft_leaders_not_preferred",
		"sluice_raft_transport_messages_total", "sluice_raft_transport_refused_total", "sluice_raft_transport_streams_opened_total",
		"sluice_raft_transport_streams_accepted_total", "sluice_raft_votes_refused_total", "sluice_cluster_feature_level", "sluice_cluster_reads_feature_level",
		"sluice_cluster_group_state_too_large", "sluice_raft_disk_full", "sluice_raft_disk_full_stalls_total",
		"sluice_raft_snapshots_created_total", "sluice_raft_snapshot_bytes_created_total"}
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(NewCollector(src)); n != len(raftDescs) {
		t.Fatalf("cluster node: %d series, want one per Raft descriptor (%d)", n, len(raftDescs))
	}
	cluster = false
	if n := testutil.CollectAndCount(NewCollector(src), names...); n != 0 {
		t.Fatalf("single node: %d Raft series, want none", n)
	}
}

// A single node's transaction log is reported; a cluster node (Txn says
// false: its coordinator keeps no file) reports none of its series.
func TestCollectorMapsTxnLog(t *testing.T) {
	single := true
	src := SourceFuncs{Txn: func() (TxnStat, bool) { return TxnStat{Records: 448, Syncs: 47}, single }}
	want := `
# HELP sluice_txn_log_records_total Records the Kafka transaction coordinator wrote to transactions.log (one per step of a transaction).
# TYPE sluice_txn_log_records_total counter
sluice_txn_log_records_total 448
# HELP sluice_txn_log_syncs_total fdatasyncs of transactions.log; txn_log_records_total over this is how many records each sync made durable (the group commit of transactions running at once).
# TYPE sluice_txn_log_syncs_total counter
sluice_txn_log_syncs_total 47
`
	names := []string{"sluice_txn_log_records_total", "sluice_txn_log_syncs_total"}
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	single = false
	if n := testutil.CollectAndCount(NewCollector(src), names...); n != 0 {
		t.Fatalf("cluster node: %d transaction log series, want none", n)
	}
}

// The idempotent producers: a gauge of those remembered and a counter of those expired.
func TestCollectorMapsProducers(t *testing.T) {
	src := SourceFuncs{Producers: func() ProducerStat { return ProducerStat{Remembered: 12, Expired: 3} }}
	want := `
# HELP sluice_idempotent_producers Idempotent producer ids remembered over the partitions this node holds (a producer of n partitions counts n times); each costs memory and bytes in every producer snapshot and replicated checkpoint. It falls as retention removes a producer's last batch and as idle producers expire.
# TYPE sluice_idempotent_producers gauge
sluice_idempotent_producers 12
# HELP sluice_idempotent_producers_expired_total Idempotent producers forgotten after producer.id.expiration (--producer-id-expiration) without writing; a forgotten producer's next batch is accepted at any sequence, as Kafka does.
# TYPE sluice_idempotent_producers_expired_total counter
sluice_idempotent_producers_expired_total 3
`
	names := []string{"sluice_idempotent_producers", "sluice_idempotent_producers_expired_total"}
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(NewCollector(SourceFuncs{}), names...); n != 0 {
		t.Fatalf("no producers func: %d series, want none", n)
	}
}

// A single node never calls RaftRounds and shows no Ready round series; a cluster node's
// shows its rounds, however many times it asked for the observer.
func TestRaftRoundsOnlyWhereAsked(t *testing.T) {
	m := New("test")
	if n, err := testutil.GatherAndCount(m.Registry(), "sluice_raft_ready_round_duration_seconds"); err != nil || n != 0 {
		t.Fatalf("a single node shows %d Ready round series (%v)", n, err)
	}
	observe := m.RaftRounds()
	observe(time.Millisecond)
	m.RaftRounds()(time.Millisecond)
	if n, err := testutil.GatherAndCount(m.Registry(), "sluice_raft_ready_round_duration_seconds"); err != nil || n != 1 {
		t.Fatalf("%d Ready round series after two rounds (%v), want 1", n, err)
	}
	var d dto.Metric
	if err := m.raftRound.Write(&d); err != nil || d.GetHistogram().GetSampleCount() != 2 {
		t.Fatalf("%d rounds counted (%v), want both", d.GetHistogram().GetSampleCount(), err)
	}
}
