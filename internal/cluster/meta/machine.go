package meta

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Result is what applying one command did, kept for the node that proposed it.
type Result struct {
	Request uint64
	Topic   *Topic // CreateTopic, AddPartitions, UpdateTopic: the topic after the change
	// Queue: CreateQueue, UpdateQueue: the queue after the change; a CreateQueue refused
	// with ErrQueueExists: the queue that exists (SQS's CreateQueue is idempotent).
	Queue *Queue
	Err   error  // the catalog refused the command (ErrTopicExists, ErrUnknownTopic, ...)
	Index uint64 // SetTxn: the entry's index, the record's (txns.go)
}

// maxResults bounds the results kept for proposals whose caller gave up waiting.
const maxResults = 1024

// Machine is the catalog's replicated state on one node. It is a multiraft.StateMachine:
// the host applies entries from its Ready loop; State and Changed may be called from any
// goroutine.
type Machine struct {
	node  uint64
	state atomic.Pointer[State]

	mu      sync.Mutex // guards changed and results
	changed chan struct{}
	results map[uint64]Result

	// gmu guards the group-offsets hook and what waits for it (groupoffsets.go). Taken
	// before the hook's own locks, never while holding mu.
	gmu     sync.Mutex
	hook    GroupOffsets
	pending []groupOffsets // applied before a hook was set, oldest first
	offsets bool           // a hook was set or a group-offsets entry applied: keep the log
	// complete: the last snapshot taken or restored holds the whole group state
	// (groupstate.go), so the log may be compacted behind it. forget: pending starts with
	// such a state, which the hook must take in place of its own.
	complete, forget bool
	// stateTooLarge: at LevelGroupState, the last snapshot could not carry the group state
	// (MaxGroupStateBytes): the log is no longer compacted (groupstate.go).
	stateTooLarge bool
	// snapGen counts the snapshots taken or restored, for an encoding to tell whether
	// complete and stateTooLarge are still its own to set (capture.go).
	snapGen uint64
	// advertised is the feature level this node tells the leader it reads (features.go).
	advertised atomic.Int64
	// refusesLeadership says whether this node refuses leadership (its disk is full, or
	// it is stopping), for its peers (nodestate.go).
	refusesLeadership atomic.Pointer[func() bool]
	// leadersAnswer encodes the groups this node leads, for its peers (nodestate.go).
	leadersAnswer atomic.Pointer[func() []byte]
	// listeners are this node's TLS listeners' advertised addresses (listeners.go).
	listeners atomic.Pointer[Listeners]
	// lastApplied is the index of the last entry applied (Apply's thread only): what a
	// snapshot's offsets payload is as of (membership_offsets.go).
	lastApplied uint64
}

var (
	_ multiraft.StateMachine      = (*Machine)(nil)
	_ multiraft.CompactionLimiter = (*Machine)(nil)
)

// NewMachine returns the empty catalog of node (whose proposals' results it keeps).
func NewMachine(node multiraft.NodeID) *Machine {
	m := &Machine{node: uint64(node), changed: make(chan struct{}), results: map[uint64]Result{}}
	m.state.Store(emptyState())
	m.advertised.Store(MaxFeatureLevel)
	return m
}

// State returns the current catalog. It is never modified: read it without a lock.
func (m *Machine) State() *State { return m.state.Load() }

// Changed returns a channel closed at the next change of State (every applied batch of
// entries, every restore). A watcher takes the channel, reads State, and waits on the
// channel: a change between the two closes the channel it holds, so none is missed.
func (m *Machine) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// publish makes s the state and wakes the watchers.
func (m *Machine) publish(s *State) {
	m.state.Store(s)
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// Apply applies committed commands in log order. A malformed entry stops the group.
func (m *Machine) Apply(ents []multiraft.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	s := m.State().clone()
	type kept struct {
		index uint64
		r     Result
	}
	var mine []kept
	var offsets []groupOffsets
	catalog := false
	for _, e := range ents {
		c, err := Decode(e.Data)
		if err != nil {
			return fmt.Errorf("meta: entry %d: %w", e.Index, err)
		}
		if c.Op == OpSetFeatureLevel {
			if err := checkLevel(c.Level); err != nil {
				return fmt.Errorf("meta: entry %d: %w", e.Index, err)
			}
		}
		var r Result
		if c.Op == OpGroupOffsets {
			// Not the catalog's: State stays as it is (no reconcile round per commit).
			offsets = append(offsets, groupOffsets{e.Index, c.Payload})
		} else {
			r = s.apply(e, &c)
			s.Index, catalog = e.Index, true
			if c.Op != OpSetTxn {
				s.CatalogChanged = e.Index
			}
		}
		if c.Origin == m.node {
			r.Request = c.Request
			mine = append(mine, kept{e.Index, r})
		}
	}
	m.lastApplied = ents[len(ents)-1].Index
	// Publish before the results: a caller that got its result sees a State at least as new.
	if catalog {
		m.publish(s)
	}
	// And hand the offsets over before the results too: a commit answered is applied here.
	if err := m.deliver(offsets); err != nil {
		return err
	}
	m.mu.Lock()
	for _, k := range mine {
		m.keep(k.index, k.r)
	}
	m.mu.Unlock()
	return nil
}

// keep records a result for this node's proposer, dropping the oldest ones of callers that
// stopped waiting once there are too many. m.mu is held.
func (m *Machine) keep(index uint64, r Result) {
	m.results[index] = r
	if len(m.results) <= maxResults {
		return
	}
	for i := range m.results {
		if i+maxResults/2 < index {
			delete(m.results, i)
		}
	}
}

// take removes and returns the result of this node's command at index with request req.
func (m *Machine) take(index, req uint64) (Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[index]
	if !ok || r.Request != req {
		return Result{}, false
	}
	delete(m.results, index)
	return r, true
}

// refusalOf removes and returns the refusal applied for one of this node's requests reqs
// (a forwarded command's, whose index the forwarder never learns), if there is one. A
// command that applied without a refusal is left for the bound in keep to drop.
func (m *Machine) refusalOf(reqs []uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range m.results {
		if r.Err != nil && slices.Contains(reqs, r.Request) {
			delete(m.results, i)
			return r.Err
		}
	}
	return nil
}

// apply runs one command on s, which belongs to this Apply (not yet published). Only s and
// the entry decide the outcome.
func (s *State) apply(e multiraft.Entry, c *Command) Result {
	switch c.Op {
	case OpRegisterNode:
		return s.registerNode(c.Node)
	case OpCreateTopic:
		return s.createTopic(e, c)
	case OpDeleteTopic:
		if _, ok := s.Topics[c.Name]; !ok {
			return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)}
		}
		delete(s.Topics, c.Name)
		return Result{}
	case OpAddPartitions:
		return s.addPartitions(e, c)
	case OpUpdateTopic:
		t, ok := s.Topics[c.Name]
		if !ok {
			return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)}
		}
		nt := *t
		nt.Settings, nt.Version = bytes.Clone(c.Settings), e.Index
		s.Topics[c.Name] = &nt
		return Result{Topic: &nt}
	case OpCreateQueue, OpDeleteQueue, OpUpdateQueue:
		return s.applyQueue(e, c)
	case OpAddNode, OpRemoveNode, OpMoveReplica, OpMoveDone, OpReassign, OpCancelReassign:
		return s.applyMembership(c)
	case OpSetGroupConfig:
		return s.applyGroupConfig(c)
	case OpSetTxn:
		return s.applyTxn(e.Index, e.Term, c)
	case OpSetFeatureLevel:
		return s.setFeatureLevel(c.Level, c.Payload)
	}
	return Result{} // unreachable: Decode refuses unknown ops
}

func (s *State) registerNode(n Node) Result {
	if n.ID == 0 {
		return Result{Err: fmt.Errorf("%w: node id 0", ErrInvalidNode)}
	}
	if s.Removed[n.ID] {
		return Result{Err: fmt.Errorf("%w: node %d", ErrNodeRemoved, n.ID)}
	}
	i := 0
	for i < len(s.Nodes) && s.Nodes[i].ID < n.ID {
		i++
	}
	if i < len(s.Nodes) && s.Nodes[i].ID == n.ID {
		s.Nodes[i] = n
	} else {
		s.Nodes = append(s.Nodes, Node{})
		copy(s.Nodes[i+1:], s.Nodes[i:])
		s.Nodes[i] = n
	}
	return Result{}
}

func (s *State) createTopic(e multiraft.Entry, c *Command) Result {
	if !ValidTopicName(c.Name) {
		return Result{Err: fmt.Errorf("%w: %q", ErrInvalidTopicName, c.Name)}
	}
	if _, ok := s.Topics[c.Name]; ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrTopicExists, c.Name)}
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return Result{Err: fmt.Errorf("%w: %d partitions (1..%d)", ErrPartitions, c.Partitions, MaxPartitions)}
	}
	rf := int(c.RF)
	if rf <= 0 {
		rf = min(DefaultReplicationFactor, len(s.Nodes))
	}
	if rf < 1 || rf > len(s.Nodes) {
		return Result{Err: fmt.Errorf("%w: %d replicas, %d nodes registered", ErrReplicationFactor, rf, len(s.Nodes))}
	}
	t := &Topic{Name: c.Name, ID: topicID(e, c.Name), Settings: bytes.Clone(c.Settings), Version: e.Index}
	t.Partitions = s.place(c.Name, 0, int(c.Partitions), rf)
	s.Topics[c.Name] = t
	return Result{Topic: t}
}

func (s *State) addPartitions(e multiraft.Entry, c *Command) Result {
	t, ok := s.Topics[c.Name]
	if !ok {
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownTopic, c.Name)}
	}
	have := len(t.Partitions)
	if int(c.Partitions) <= have || c.Partitions > MaxPartitions {
		return Result{Err: fmt.Errorf("%w: %d partitions, topic has %d (max %d)", ErrPartitions, c.Partitions, have, MaxPartitions)}
	}
	rf := t.ReplicationFactor()
	if rf > len(s.Nodes) {
		return Result{Err: fmt.Errorf("%w: %d replicas, %d nodes registered", ErrReplicationFactor, rf, len(s.Nodes))}
	}
	nt := *t
	// A new slice: the old topic's partitions stay as they were for whoever holds it.
	nt.Partitions = append(t.Partitions[:have:have], s.place(c.Name, have, int(c.Partitions), rf)...)
	nt.Version = e.Index
	s.Topics[c.Name] = &nt
	return Result{Topic: &nt}
}
