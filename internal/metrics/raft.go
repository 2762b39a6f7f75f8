package metrics

import "github.com/prometheus/client_golang/prometheus"

// RaftStat is a cluster node's multi-raft host: its groups now and its
// counters since it started (multiraft.Stats).
type RaftStat struct {
	Groups, Awake, PeersDown          int
	NotPreferred                      int // groups led here whose preferred leader is another node
	GroupTicks, Rounds, Syncs, Readys uint64
	Batches, Messages                 uint64
	Quiesces, Wakes                   uint64
	SnapshotsSent, SnapshotsRestored  uint64
	SnapshotsCreated, SnapshotBytes   uint64 // taken of this node's state machines, and their size
	VotesRefused, LostLogBeats        uint64
	TransportRefused                  uint64 // connections the cluster port refused
	// StreamsOpened and StreamsAccepted count the transport's byte streams: calls a TLS
	// client made forwarded to a peer, and peers' forwarded to this node.
	StreamsOpened, StreamsAccepted uint64
	// FeatureLevel is the cluster's (docs/cluster.md, "Upgrades"), ReadsFeatureLevel
	// what this node tells the controller it reads.
	FeatureLevel, ReadsFeatureLevel int
	// GroupStateTooLarge: the last metadata snapshot could not carry the consumer groups'
	// state, so the metadata log is no longer compacted (docs/cluster.md, "Compaction").
	GroupStateTooLarge bool
	// DiskFull: the Raft host's Ready loop waits for room on a full disk;
	// DiskFullStalls counts such waits (multiraft's diskfull.go).
	DiskFull       bool
	DiskFullStalls uint64
}

// RaftSource is a Source that also reports a cluster node's Raft host;
// SourceFuncs is one when its Raft func is set and says it runs one.
type RaftSource interface {
	RaftStats() (RaftStat, bool)
}

// RaftStats reports f.Raft's answer; ok is false without one (a single node).
func (f SourceFuncs) RaftStats() (RaftStat, bool) {
	if f.Raft == nil {
		return RaftStat{}, false
	}
	return f.Raft()
}

var (
	raftGroups     = desc("raft_groups", "Raft groups this node hosts a replica of (the metadata group, one per partition and per queue).")
	raftAwake      = desc("raft_groups_awake", "Hosted groups that tick (not quiesced): on an idle cluster this falls to about zero; a group that stays awake costs heartbeats.")
	raftPeersDown  = desc("raft_peers_down", "Peer nodes this node has not heard from within the node timeout (their groups elect leaders elsewhere).")
	raftTicks      = desc("raft_group_ticks_total", "Ticks given to awake groups (what quiesced groups do not cost).")
	raftRounds     = desc("raft_ready_rounds_total", "Rounds of the Ready loop that did work (a round persists, sends and applies for every group with a Ready).")
	raftSyncs      = desc("raft_syncs_total", "fdatasyncs of the Raft storage; raft_readys_total over this is the group commit across groups.")
	raftReadys     = desc("raft_readys_total", "Group Readys handled.")
	raftBatches    = desc("raft_transport_batches_total", "Batches sent to peers (one per peer per round at most; liveness beats included).")
	raftMessages   = desc("raft_transport_messages_total", "Raft messages sent to peers, inside those batches.")
	raftQuiesces   = desc("raft_quiesces_total", "Times a group went quiet (stopped ticking).")
	raftWakes      = desc("raft_wakes_total", "Times a quiesced group woke (a proposal, a message, a peer gone or back).")
	raftSnapsSent  = desc("raft_snapshots_sent_total", "Snapshots sent to a follower too far behind the log.")
	raftSnapsTaken = desc("raft_snapshots_restored_total", "Snapshots received from a leader and restored.")
	raftSnapsMade  = desc("raft_snapshots_created_total", "Snapshots of this node's replicas stored (each bounds what a restart re-applies and lets the Raft log be compacted).")
	raftSnapBytes  = desc("raft_snapshot_bytes_created_total", "Bytes of those snapshots: against the entries' bytes, what snapshots cost the disk (a clustered queue's snapshot holds its whole backlog).")
	raftVotesRef   = desc("raft_votes_refused_total", "Vote requests dropped because this replica was blank (a node on an empty disk, a replica not caught up): it must not vote with state it lacks.")
	raftRefused    = desc("raft_transport_refused_total", "Connections to the cluster port refused: a failed TLS handshake, not a sluice peer, another cluster's, a node not admitted. Each is counted; the log warns of them at most once every 10 s.")
	raftStreamsOut = desc("raft_transport_streams_opened_total", "Streams this node opened to peers over the cluster port to forward calls its TLS clients made (native API, SQS) to their leader.")
	raftStreamsIn  = desc("raft_transport_streams_accepted_total", "Streams peers opened to this node over the cluster port to forward calls their TLS clients made.")
	raftLostBeats  = desc("raft_lost_log_heartbeats_total", "Heartbeats dropped because they commit past entries this replica no longer holds.")
	raftFeature    = desc("cluster_feature_level", "The cluster's feature level: which kinds of entry its logs may hold (docs/cluster.md, \"Upgrades\"). It rises once every node reads the next one; below sluice_cluster_reads_feature_level on every node, some node holds it back.")
	raftReadsLevel = desc("cluster_reads_feature_level", "The feature level this node tells the controller it reads: its binary's, or --cluster-max-feature-level.")
	raftStateLarge = desc("cluster_group_state_too_large", "1 when this node's last metadata snapshot could not carry the consumer groups' state (over 48 MiB): the metadata log is no longer compacted, and a follower that falls behind it lacks the groups (docs/cluster.md, \"Compaction\").")
	raftDiskFull   = desc("raft_disk_full", "1 while this node's Raft groups wait for room on a full disk: they acknowledge nothing, and their other replicas carry on without this one (docs/cluster.md, \"A full disk\").")
	raftFullStalls = desc("raft_disk_full_stalls_total", "Times this node's Raft groups had to wait for room on a full disk.")
	raftNotPref    = desc("raft_leaders_not_preferred", "Partitions and queues this node leads whose preferred leader (their first replica) is another node: what --cluster-leader-balance, Kafka's ElectLeaders or sluice cluster elect hands back (Kafka's PreferredReplicaImbalanceCount, per node).")
)

var raftDescs = []*prometheus.Desc{raftGroups, raftAwake, raftPeersDown, raftTicks, raftRounds, raftSyncs, raftReadys,
	raftBatches, raftMessages, raftQuiesces, raftWakes, raftSnapsSent, raftSnapsTaken, raftSnapsMade, raftSnapBytes, raftVotesRef, raftLostBeats, raftRefused, raftStreamsOut, raftStreamsIn, raftNotPref, raftFeature, raftReadsLevel, raftStateLarge,
	raftDiskFull, raftFullStalls}

func collectRaft(ch chan<- prometheus.Metric, s RaftStat) {
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(raftGroups, s.Groups)
	gauge(raftAwake, s.Awake)
	gauge(raftPeersDown, s.PeersDown)
	gauge(raftNotPref, s.NotPreferred)
	gauge(raftFeature, s.FeatureLevel)
	gauge(raftReadsLevel, s.ReadsFeatureLevel)
	gauge(raftStateLarge, map[bool]int{true: 1}[s.GroupStateTooLarge])
	gauge(raftDiskFull, map[bool]int{true: 1}[s.DiskFull])
	counter(raftFullStalls, s.DiskFullStalls)
	counter(raftTicks, s.GroupTicks)
	counter(raftRounds, s.Rounds)
	counter(raftSyncs, s.Syncs)
	counter(raftReadys, s.Readys)
	counter(raftBatches, s.Batches)
	counter(raftRefused, s.TransportRefused)
	counter(raftStreamsOut, s.StreamsOpened)
	counter(raftStreamsIn, s.StreamsAccepted)
	counter(raftMessages, s.Messages)
	counter(raftQuiesces, s.Quiesces)
	counter(raftWakes, s.Wakes)
	counter(raftSnapsSent, s.SnapshotsSent)
	counter(raftSnapsTaken, s.SnapshotsRestored)
	counter(raftSnapsMade, s.SnapshotsCreated)
	counter(raftSnapBytes, s.SnapshotBytes)
	counter(raftVotesRef, s.VotesRefused)
	counter(raftLostBeats, s.LostLogBeats)
}
