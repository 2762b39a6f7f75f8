package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
	"github.com/sluice-mq/sluice/internal/queue"
)

// clusterQueues are the queue groups this node hosts, by queue name.
type clusterQueues struct {
	mu     sync.Mutex // serialises reconcile rounds; guards hosted
	hosted map[string]*hostedQueue
}

// hostedQueue is this node's replica of one queue's group.
type hostedQueue struct {
	name  string
	group multiraft.GroupID
	sm    *wakingMachine
	q     *replqueue.Queue
	// moving: a dead-letter mover runs for this queue (cluster_queues_dlq.go).
	moving atomic.Bool
	// configuring: a Configure of the catalog's times is in flight (cluster_queues_times.go).
	configuring atomic.Bool
	// times are the catalog's times as decoded from timesOf, the catalog entry they were
	// read from (guarded by clusterQueues.mu).
	timesOf *meta.Queue
	times   replqueue.Times
	// staleRefused counts the receipts this node refused as stale while it led the queue
	// (QueueStats.StaleRefused): a refusal changes nothing replicated, as on a single node.
	staleRefused atomic.Uint64
}

// wakingMachine is a replqueue.Machine that wakes long polls whenever it applies entries
// or restores a snapshot: a send committed on the leader closes the channel a waiting
// Receive holds, so waiting costs no Raft entry.
type wakingMachine struct {
	*replqueue.Machine
	log *slog.Logger
	mu  sync.Mutex
	ch  chan struct{}
	// queue proposes for ServeRequest (a peer's Put of dead-letter copies); set once the
	// group is hosted.
	queue atomic.Pointer[replqueue.Queue]
	// elect answers a peer's election request (cluster_elect.go).
	elect func(context.Context) []byte
}

func newWakingMachine(m *replqueue.Machine, log *slog.Logger) *wakingMachine {
	return &wakingMachine{Machine: m, log: log, ch: make(chan struct{})}
}

// Apply applies, and says so loudly when the machine refuses an entry: the host then
// stops the group on this node for good (it cannot skip the entry), which nothing else
// reports.
func (w *wakingMachine) Apply(ents []multiraft.Entry) error {
	err := w.Machine.Apply(ents)
	if err != nil {
		w.log.Error("cluster: a queue's replica refused a committed entry; its group is stopped on this node", "err", err)
	}
	w.wake()
	return err
}

func (w *wakingMachine) Restore(data []byte) error {
	err := w.Machine.Restore(data)
	if err != nil {
		w.log.Error("cluster: a queue's replica could not restore a snapshot", "err", err)
	}
	w.wake()
	return err
}

func (w *wakingMachine) wake() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// changed returns a channel closed at the next apply or restore. Take it before reading
// the machine, so a change in between is not missed.
func (w *wakingMachine) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (c *clusterRT) hostedQueue(name string) *hostedQueue {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	return c.queues.hosted[name]
}

// reconcileQueues hosts the group of every catalog queue placed on this node and stops
// hosting (and deletes the storage of) the groups of queues the catalog dropped. Only
// groups this process hosted are removed, so a restart replaying a stale catalog never
// deletes anything.
func (c *clusterRT) reconcileQueues() {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	if c.queues.hosted == nil {
		c.queues.hosted = map[string]*hostedQueue{}
	}
	st := c.meta.State()
	for name, h := range c.queues.hosted {
		// Dropped, or moved off this node (and the move is over: until then the node may
		// still be in the group's configuration, cluster_moves.go).
		if cq := st.Queues[name]; cq == nil || cq.Group != h.group || !hostsQueue(cq, c.node) {
			if err := c.host.RemoveGroup(h.group); err != nil && !errors.Is(err, multiraft.ErrGroupUnknown) {
				c.log.Warn("cluster: removing a deleted queue's group; retrying", "queue", name, "err", err)
				continue
			}
			delete(c.queues.hosted, name)
		}
	}
	for _, name := range st.QueueNames() {
		cq := st.Queues[name]
		if c.queues.hosted[name] != nil || !hostsQueue(cq, c.node) {
			continue
		}
		h, err := c.hostQueue(cq)
		if err != nil {
			c.log.Warn("cluster: queue not yet hosted; retrying", "queue", name, "err", err)
			continue
		}
		c.queues.hosted[name] = h
	}
	hosted := make([]*hostedQueue, 0, len(c.queues.hosted))
	for _, h := range c.queues.hosted {
		hosted = append(hosted, h)
	}
	c.moveAllDeadLetters(hosted)
	c.configureQueues(hosted)
}

// replicatedConfig is the cursor configuration of a queue's replicated state machine with
// s's times. A replica builds its machine with the times the group was created with
// (createdConfig, cluster_queues_times.go), which later Configure entries change at one
// place in the log on every replica. Receives always name their visibility, so the
// Visibility here is never used; it is the extension limit only to be valid.
func replicatedConfig(s QueueSettings) queue.Config {
	return queue.Config{Visibility: s.MaxExtension, MaxExtension: s.MaxExtension, Retention: s.Retention, FIFO: s.FIFO}
}

func (c *clusterRT) hostQueue(cq *meta.Queue) (*hostedQueue, error) {
	s, err := queueSettingsOf(cq)
	if err != nil {
		return nil, err
	}
	cfg, err := createdConfig(cq, s) // cluster_queues_times.go
	if err != nil {
		return nil, err
	}
	m, err := replqueue.NewMachine(c.node, cfg)
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", cq.Name, err)
	}
	wm := newWakingMachine(m, c.log.With("queue", cq.Name, "group", cq.Group))
	name := cq.Name
	wm.elect = func(ctx context.Context) []byte { return c.serveQueueElect(ctx, name) }
	// The catalog's replica list bootstraps a group this node never held; one with state
	// on disk reopens from it (and restores its machine from snapshot and log).
	// A queue whose replicas moved is never bootstrapped from them: a node new to it
	// starts empty and is sent a snapshot (cluster_moves.go).
	if err := c.host.CreateGroup(cq.Group, bootstrapVoters(cq.Replicas, cq.Moved), wm); err != nil {
		return nil, fmt.Errorf("queue %s: raft group %d: %w", cq.Name, cq.Group, err)
	}
	if st, err := c.host.Status(cq.Group); err == nil && st.Term <= 1 && st.Leader == 0 && !cq.Moved && cq.Replicas[0] == c.node {
		// A group just bootstrapped: its preferred leader stands at once rather than after
		// an election timeout. A group reopened after a restart does not (as partitions):
		// it would only disturb the leader its peers elected meanwhile.
		_ = c.host.Campaign(cq.Group)
	}
	q := replqueue.NewQueue(c.host, cq.Group, m, c.b.now)
	q.SetAdmit(c.admitQueueOp) // cluster_entry_levels.go
	wm.queue.Store(q)
	return &hostedQueue{name: cq.Name, group: cq.Group, sm: wm, q: q}, nil
}

// QueueReplicaState is one hosted queue's Raft group on this node.
type QueueReplicaState struct {
	Queue    string  `json:"queue"`
	Group    uint64  `json:"group"`
	Leader   int32   `json:"leader"` // 0: none known
	Term     uint64  `json:"term"`
	Replicas []int32 `json:"replicas"`
	Learners []int32 `json:"learners,omitempty"` // non-voting replicas catching up (a move)
	Commit   uint64  `json:"commit"`
	Applied  uint64  `json:"applied"`
	Quiesced bool    `json:"quiesced"`
	Depth    int64   `json:"depth"` // messages not yet deleted, as this replica holds them
	// Preferred and Pinned: ReplicaState's.
	Preferred int32 `json:"preferred"`
	Pinned    bool  `json:"pinned,omitempty"`
}

// hostedQueueList is the queues this node hosts a replica of now, in no order.
func (c *clusterRT) hostedQueueList() []*hostedQueue {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	return slices.Collect(maps.Values(c.queues.hosted))
}

// queueReplicas lists the hosted queues by name, for ClusterStatus.
func (c *clusterRT) queueReplicas() []QueueReplicaState {
	hosted := c.hostedQueueList()
	slices.SortFunc(hosted, func(a, b *hostedQueue) int { return strings.Compare(a.name, b.name) })
	out := []QueueReplicaState{}
	cat := c.meta.State()
	for _, h := range hosted {
		st, err := c.host.Status(h.group)
		if err != nil {
			continue
		}
		d := h.sm.Depth()
		qs := QueueReplicaState{Queue: h.name, Group: uint64(h.group), Leader: int32(st.Leader), Term: st.Term,
			Commit: st.Commit, Applied: st.Applied, Quiesced: st.Quiesced, Depth: d.Visible + d.InFlight + d.Delayed}
		for _, v := range st.Voters {
			qs.Replicas = append(qs.Replicas, int32(v))
		}
		for _, v := range st.Learners {
			qs.Learners = append(qs.Learners, int32(v))
		}
		if cq := cat.Queues[h.name]; cq != nil && cq.Group == h.group && len(cq.Replicas) > 0 {
			qs.Preferred, qs.Pinned = int32(cq.Replicas[0]), cq.Pinned
			if cq.Old == nil { // no move on: the catalog's order, the preferred leader first
				qs.Replicas = qs.Replicas[:0]
				for _, r := range cq.Replicas {
					qs.Replicas = append(qs.Replicas, int32(r))
				}
			}
		}
		out = append(out, qs)
	}
	return out
}
