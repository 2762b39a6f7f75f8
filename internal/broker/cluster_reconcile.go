package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"go.etcd.io/raft/v3"
)

// clusterRT is the broker's side of the cluster: it keeps the local topics and the hosted
// partition groups in step with the catalog.
type clusterRT struct {
	b     *Broker
	log   *slog.Logger
	host  *multiraft.Host
	node  multiraft.NodeID
	meta  *meta.Machine
	cat   *meta.Catalog
	peers PeerSet   // nil: the transport's peers are fixed
	addr  string    // this node's --cluster-addr ("" unknown)
	disk  GroupDisk // nil: no garbage collection of groups (cluster_gc.go)
	// collected is when collectGroups last ran (the run loop's only), every how often.
	collected    time.Time
	collectEvery time.Duration
	// balanceEvery is how often leaders are handed back (negative: never).
	balanceEvery time.Duration
	// balanced is the catalog state (immutable, replaced on every change) in which the
	// metadata leader's last rebalance found nothing to move (the run loop's only):
	// asking again each second listed and counted every group's placement, a tenth of
	// an idle metadata leader's CPU with 1,000 partitions.
	balanced *meta.State

	// mu serialises reconcile rounds (the background loop and an admin call's own round).
	mu sync.Mutex
	// reconciled is the catalog index (meta.State.CatalogChanged) the last round brought
	// this node to, and inStep whether that round finished: a round over an unchanged
	// catalog is skipped then (it would unmarshal every topic's settings each second for
	// nothing).
	reconciled uint64
	inStep     bool
	// queues are the queue groups hosted here (cluster_queues_host.go).
	queues clusterQueues
	// pulls are the partition machines' pull counters, by group (cluster_replica_pull.go).
	pulls pullRegistry
	// txn is the transaction coordinator's cluster side (cluster_txn.go).
	txn *clusterTxn
	// subNext rotates the partition a replicated subscription's receive starts at; subsMu
	// makes the controller's subscription changes one at a time (cluster_subs.go).
	subNext atomic.Uint64
	subsMu  sync.Mutex
	// stopping is set once the node began handing its leaderships over to stop
	// (cluster_handoff.go): a peer that asks hears that it refuses leadership.
	stopping atomic.Bool
	// remote is what the peers said of the groups they lead (cluster_leaders.go).
	remote remoteLeaders
	// listeners are the peers' TLS listeners, as they said (cluster_listeners.go).
	listeners peerListeners
	// featureAsking is set while the metadata leader asks the members what feature level
	// they read; featureBehind is the members the last round found reading less than this
	// binary (nil: none, or not the leader), for the log and ClusterStatus
	// (cluster_features.go).
	featureAsking atomic.Bool
	featureBehind atomic.Pointer[[]string]
	// featureCapNoted: the log said once that this node's cap is below the level.
	featureCapNoted atomic.Bool
	// receiptKey is the catalog's receipt key made ready for use (cluster_receipts.go).
	receiptKey atomic.Pointer[receiptKey]
	// stateLargeNoted: the log said the groups' state outgrew a metadata snapshot
	// (meta.Machine.GroupStateTooLarge), until it fits again.
	stateLargeNoted atomic.Bool
	// membershipsOn: the group coordinator was told the level admits membership records
	// (the run loop's; a coordinator rebuilt later reads the level when it is made).
	membershipsOn atomic.Bool

	stop chan struct{}
	done chan struct{}
	// bg is the work started off the run loop (background, for retention trims:
	// cluster_retention.go), bgCtx ended and bg waited for by close; bgMu orders a start
	// against close (bgClosed: no more starts).
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	bgMu     sync.Mutex
	bgClosed bool
}

func newClusterRT(b *Broker, o *ClusterOptions) *clusterRT {
	every := o.CollectEvery
	if every <= 0 {
		every = DefaultCollectEvery
	}
	balance := o.LeaderBalanceEvery
	if balance == 0 {
		balance = balanceEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	// A Raft append the disk had no room for stalls the node's Raft groups (multiraft's
	// diskfull.go); noted like a full disk under a local write, it frees the headroom (the
	// retried append fits at once), refuses new data where this node leads and turns
	// /readyz to 503 until maintenance finds room.
	o.Host.SetOnDiskFull(func(err error) { b.disk.Note(err) })
	c := &clusterRT{b: b, log: b.log.With("component", "cluster"), host: o.Host, node: o.Host.Node(),
		meta: o.Meta, cat: o.Catalog, peers: o.Peers, addr: o.Addr, disk: o.Disk, collectEvery: every, balanceEvery: balance, stop: make(chan struct{}), done: make(chan struct{}),
		bgCtx: ctx, bgCancel: cancel, txn: newClusterTxn(ctx, b, o)}
	// Asked by peers before they hand this node a leadership (cluster_shed.go).
	o.Meta.SetRefusesLeadership(func() bool { return b.disk.Admit() != nil || c.stopping.Load() })
	o.Meta.SetLeadersAnswer(c.encodeLeaders) // cluster_leaders.go
	return c
}

// run reconciles after every catalog change, and every second anyway (a round that failed
// half way, say a full disk, is retried).
func (c *clusterRT) run() {
	defer close(c.done)
	balanced := time.Now()
	for {
		changed := c.meta.Changed()
		seen := c.meta.State().CatalogChanged
		c.reconcile()
		c.reconcileCursors() // cluster_subs_host.go
		c.reconcileQueues()
		c.featureRound()               // cluster_features.go
		c.refreshCheckpoints()         // cluster_replica_state.go
		c.shedLeadersWhileFull()       // cluster_shed.go
		c.refreshRemoteLeaders()       // cluster_leaders.go
		c.refreshListeners(time.Now()) // cluster_listeners.go
		if time.Since(c.collected) >= c.collectEvery {
			c.collectGroups() // cluster_gc.go
			c.collected = time.Now()
		}
		every := time.Second
		if c.membership() { // a replica move is on: its next step comes sooner
			every = moveRound
		}
		if c.balanceEvery > 0 && time.Since(balanced) >= c.balanceEvery {
			c.balanceLeaders()
			c.balanceQueueLeaders() // cluster_moves.go
			balanced = time.Now()
		}
		if !c.waitRound(changed, seen, untilAligned(every)) {
			return
		}
	}
}

// waitRound waits for the next round: a catalog change after seen, or d; false when the
// broker closes. A change of transaction records alone (cluster_txn.go) leaves everything
// the rounds keep in step as it was: no round per step of every transaction.
func (c *clusterRT) waitRound(changed <-chan struct{}, seen uint64, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return false
		case <-t.C:
			return true
		case <-changed:
			changed = c.meta.Changed()
			if c.meta.State().CatalogChanged != seen {
				return true
			}
		}
	}
}

func (c *clusterRT) close() {
	close(c.stop)
	<-c.done
	c.bgMu.Lock()
	c.bgClosed = true
	c.bgMu.Unlock()
	c.bgCancel()
	c.bg.Wait()
}

// background runs f on a goroutine that close waits for, with a context close ends;
// false (f not run) once close has begun. Maintenance still runs then.
func (c *clusterRT) background(f func(ctx context.Context)) bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgClosed {
		return false
	}
	c.bg.Go(func() { f(c.bgCtx) })
	return true
}

// reconcile makes the local broker match the catalog as this node has applied it.
func (c *clusterRT) reconcile() {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.meta.State()
	if c.inStep && st.CatalogChanged == c.reconciled { // transaction records alone changed nothing here
		return
	}
	ok := true
	for _, name := range sortedTopicNames(st) {
		if err := c.reconcileTopic(st, st.Topics[name]); err != nil {
			ok = false
			c.log.Warn("cluster: topic not yet in step with the catalog; retrying", "topic", name, "err", err)
		}
	}
	for _, t := range c.b.streams.topicList() {
		s, _ := t.snapshot()
		if s.UUID == ([16]byte{}) || st.Index < s.CatalogIndex {
			// Not the catalog's (created before this node joined a cluster), or the
			// catalog here has not yet caught up with the change that created it (a
			// restart replaying the metadata log): never delete on a stale view.
			continue
		}
		if ct := st.Topics[s.Name]; ct == nil || ct.ID != s.UUID {
			if err := c.dropTopic(t); err != nil {
				ok = false
				c.log.Warn("cluster: deleting a topic the catalog deleted; retrying", "topic", s.Name, "err", err)
			}
		}
	}
	c.reconciled, c.inStep = st.CatalogChanged, ok
}

func sortedTopicNames(st *meta.State) []string {
	names := make([]string, 0, len(st.Topics))
	for n := range st.Topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// reconcileTopic creates, grows or updates the local topic and hosts its partitions that
// are placed here.
func (c *clusterRT) reconcileTopic(st *meta.State, ct *meta.Topic) error {
	want, err := topicFromCatalog(ct)
	if err != nil {
		return err
	}
	t, err := c.b.streams.topic(ct.Name)
	if err == nil {
		if s, _ := t.snapshot(); s.UUID != ct.ID {
			// A topic of the same name from before a delete this node missed.
			if err := c.dropTopic(t); err != nil {
				return err
			}
			t, err = nil, ErrTopicNotFound
		}
	}
	if errors.Is(err, ErrTopicNotFound) {
		if _, err := c.b.createTopicLocal(want); err != nil && !errors.Is(err, ErrTopicExists) {
			return err
		}
		if t, err = c.b.streams.topic(ct.Name); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	cur, parts := t.snapshot()
	if n := int32(len(ct.Partitions)); n > int32(len(parts)) {
		if _, err := c.b.addPartitionsLocal(ct.Name, n); err != nil {
			return err
		}
		cur, parts = t.snapshot()
	}
	if want.CatalogIndex > cur.CatalogIndex {
		if _, err := c.b.updateTopicLocal(ct.Name, false, func(s *TopicSettings) error {
			s.Retention, s.RetentionBytes = want.Retention, want.RetentionBytes
			s.MaxMessageBytes, s.CleanupPolicy = want.MaxMessageBytes, want.CleanupPolicy
			s.DeleteRetention, s.MinCompactionLag, s.MaxCompactionLag = want.DeleteRetention, want.MinCompactionLag, want.MaxCompactionLag
			s.MinCleanableDirtyRatio, s.SegmentBytes = want.MinCleanableDirtyRatio, want.SegmentBytes
			s.CatalogIndex = want.CatalogIndex
			return nil
		}); err != nil {
			return err
		}
	}
	var errs []error
	for i, cp := range ct.Partitions {
		if i >= len(parts) {
			continue
		}
		if hostsPartition(cp, c.node) {
			errs = append(errs, c.hostPartition(parts[i], cp))
		} else {
			errs = append(errs, c.unhostPartition(parts[i])) // moved off this node
		}
	}
	return errors.Join(errs...)
}

// topicFromCatalog reads a catalog topic as the broker's settings.
func topicFromCatalog(ct *meta.Topic) (TopicSettings, error) {
	var s TopicSettings
	if err := json.Unmarshal(ct.Settings, &s); err != nil {
		return TopicSettings{}, fmt.Errorf("catalog settings of topic %s: %w", ct.Name, err)
	}
	s.Name, s.UUID, s.Partitions, s.CatalogIndex = ct.Name, ct.ID, int32(len(ct.Partitions)), ct.Version
	s.Replication = 0
	if len(ct.Partitions) > 0 {
		s.Replication = len(ct.Partitions[0].Replicas)
	}
	return s, nil
}

// hostPartition starts this node's replica of a partition's group, once.
func (c *clusterRT) hostPartition(p *partitionRT, cp meta.Partition) error {
	if h := p.repl.Load(); h != nil {
		if !slices.Equal(h.replicas, cp.Replicas) { // a move changed them (cluster_moves.go)
			p.repl.Store(&hostedReplica{part: h.part, sm: h.sm, log: h.log, group: h.group, replicas: slices.Clone(cp.Replicas)})
		}
		return nil
	}
	rl := &replicaLog{b: c.b, p: p, appliedEnd: -1, withState: c.checkpointsCarryState}
	m := replpart.NewMachine(c.node, rl)
	// A local log behind the group's snapshot (wiped, or past the compacted Raft log)
	// pulls the records from the other replicas before the group starts or goes on.
	m.SetSource(replpart.Source{Host: c.host, Group: cp.Group, Peers: cp.Replicas})
	c.pulls.add(cp.Group, m) // before CreateGroup: its Restore may be a pull worth watching
	// The catalog's replica list bootstraps a group this node never held; a group
	// with state on disk reopens from it and the list is not used. A partition whose
	// replicas moved is never bootstrapped: a node new to it starts empty.
	// The group's state machine also serves the transaction coordinator's marker requests
	// (cluster_txn_markers.go).
	sm := &partitionMachine{Machine: m, b: c.b, p: p}
	if err := c.host.CreateGroup(cp.Group, bootstrapVoters(cp.Replicas, cp.Moved), sm); err != nil {
		return fmt.Errorf("partition %s/%d: raft group %d: %w", p.topic, p.index, cp.Group, err)
	}
	part := replpart.NewPartition(c.host, cp.Group, m)
	// Cursor entries carry the proposer's time: the broker's clock, the one its readiness
	// checks (CursorReady) and an injected test clock use, not the wall clock.
	part.SetClock(c.b.now)
	part.SetAdmit(c.admitPartitionEntry) // cluster_entry_levels.go
	p.repl.Store(&hostedReplica{part: part, sm: m, log: rl, group: cp.Group, replicas: slices.Clone(cp.Replicas)})
	if st, err := c.host.Status(cp.Group); err == nil && st.Term <= 1 && st.Leader == 0 && !cp.Moved &&
		len(cp.Replicas) > 0 && cp.Replicas[0] == c.node {
		// A group just bootstrapped (term 1, nobody elected yet): its preferred leader
		// stands at once rather than after an election timeout, so a topic just created
		// is writable within a round trip. A group reopened after a restart does not: it
		// would only disturb the leader its peers elected meanwhile.
		c.campaignFresh(cp.Group)
	}
	return nil
}

// freshCampaignEvery and freshCampaignFor: how often, and how long, the preferred
// leader of a group just bootstrapped stands again while no leader is known.
const (
	freshCampaignEvery = 50 * time.Millisecond
	freshCampaignFor   = 2 * time.Second
)

// campaignFresh stands for election in a group just bootstrapped here, and again every
// freshCampaignEvery while none is known, for freshCampaignFor. The first (pre-)vote
// requests usually reach peers that have not yet applied the topic's creation and so do
// not host the group: the host drops messages for groups it does not hold. Then whichever
// replica's election timeout (10-19 ticks) fires first wins, two times in three not the
// preferred one, and the balancer hands the partition back up to 10 s later — under load,
// a stall of every producer of that partition (NOT_LEADER_OR_FOLLOWER, a metadata refresh,
// a retry). Standing again before any timeout fires makes the preferred replica the first
// leader. A campaign cannot unseat a leader: it stops once one is known, and a PreVote is
// refused by followers that heard from a leader within an election timeout (CheckQuorum).
func (c *clusterRT) campaignFresh(g multiraft.GroupID) {
	_ = c.host.Campaign(g)
	go func() {
		t := time.NewTicker(freshCampaignEvery)
		defer t.Stop()
		for deadline := time.Now().Add(freshCampaignFor); time.Now().Before(deadline); {
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
			st, err := c.host.Status(g)
			if err != nil || st.Leader != 0 {
				return
			}
			_ = c.host.Campaign(g)
		}
	}()
}

// dropTopic deletes a local topic the catalog no longer has, and its groups here.
func (c *clusterRT) dropTopic(t *topicRT) error {
	_, parts := t.snapshot()
	for _, p := range parts {
		if r := p.repl.Load(); r != nil {
			if err := c.host.RemoveGroup(r.group); err != nil && !errors.Is(err, multiraft.ErrGroupUnknown) {
				return err
			}
			p.repl.Store(nil)
		}
	}
	return c.b.deleteTopicLocal(t.name)
}

// placement describes a partition for clients (Kafka Metadata).
func (c *clusterRT) placement(topic string, p *partitionRT) Placement {
	var pl Placement
	hosted := p.repl.Load()
	var replicas []multiraft.NodeID
	if hosted != nil {
		replicas = hosted.replicas
	} else {
		if ct := c.meta.State().Topics[topic]; ct != nil && int(p.index) < len(ct.Partitions) {
			replicas = ct.Partitions[p.index].Replicas
		}
	}
	for _, r := range replicas {
		pl.Replicas = append(pl.Replicas, int32(r))
	}
	if hosted == nil {
		// Not hosted here: the leader its replicas named (cluster_leaders.go), else (none
		// asked yet, none answered) the catalog's preferred leader.
		if rl, ok := c.unhostedLeader(topic, p.index); ok {
			pl.Leader, pl.Epoch = int32(rl.Leader), int32(rl.Term)
			for _, v := range rl.InSync {
				pl.InSync = append(pl.InSync, int32(v))
			}
			return pl
		}
		if len(pl.Replicas) > 0 {
			pl.Leader = pl.Replicas[0]
		}
		pl.InSync = slices.Clone(pl.Replicas)
		return pl
	}
	st, err := c.host.Status(hosted.group)
	if err != nil {
		return pl
	}
	pl.Leader, pl.Epoch = int32(st.Leader), int32(st.Term)
	inSync := st.InSync // the leader's view; a follower does not know it
	if st.Role != raft.StateLeader {
		inSync = st.Voters
	}
	for _, v := range inSync {
		pl.InSync = append(pl.InSync, int32(v))
	}
	if st.Role != raft.StateLeader && st.Leader == 0 {
		pl.Leader = 0
	}
	return pl
}

// balanceEvery is how often a node hands back the leadership of partitions whose
// preferred leader is in sync again (Kafka's auto.leader.rebalance.enable) unless
// ClusterOptions.LeaderBalanceEvery says otherwise. A variable so a test that moves a
// leader by hand can keep it where it put it (set before its cluster starts).
var balanceEvery = 10 * time.Second

// balanceLeaders hands each partition this node leads but does not prefer to its
// preferred leader (the first replica) once that replica is alive and caught up: after a
// failover the leaders crowd onto the survivors, and this spreads them back.
func (c *clusterRT) balanceLeaders() {
	refuses := c.refusingNodes() // asked only of a preferred leader about to be handed one
	for _, t := range c.b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			h := p.repl.Load()
			if h == nil || len(h.replicas) == 0 || h.replicas[0] == c.node {
				continue
			}
			st, err := c.host.Status(h.group)
			if err != nil || st.Role != raft.StateLeader || !slices.Contains(st.InSync, h.replicas[0]) || refuses(h.replicas[0]) {
				continue
			}
			if err := c.host.TransferLeadership(h.group, h.replicas[0]); err == nil {
				c.log.Info("cluster: handing a partition back to its preferred leader", "topic", p.topic,
					"partition", p.index, "to", uint64(h.replicas[0]))
			}
		}
	}
}
