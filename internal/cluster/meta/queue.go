package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Queue is one work queue of the catalog (SQS semantics): its settings and its one Raft
// group (internal/cluster/replqueue). A *Queue handed out is never modified.
type Queue struct {
	Name     string
	Settings []byte // opaque to meta: the broker's JSON of the queue settings (nil: none)
	// Group is the queue's Raft group, taken from State.NextGroup as a partition's is and
	// never reused: a queue deleted and created again under the same name is a new group.
	Group    multiraft.GroupID
	Replicas []multiraft.NodeID // first one is the preferred leader
	Old      []multiraft.NodeID // while a move is in progress (Partition.Old)
	Moved    bool               // Partition.Moved
	Pinned   bool               // Partition.Pinned
	Original []multiraft.NodeID // Partition.Original
	Created  uint64             // the log index of the CreateQueue
	Version  uint64             // the log index of the last change to this queue
}

// MaxQueueName is SQS's 80 characters plus a FIFO queue's ".fifo".
const MaxQueueName = 85

// Queue refusals, computed in apply.
var (
	ErrQueueExists      = errors.New("meta: queue already exists")
	ErrUnknownQueue     = errors.New("meta: unknown queue")
	ErrInvalidQueueName = errors.New("meta: invalid queue name")
)

// ValidQueueName reports whether name can name a queue in the catalog: 1 to 85 ASCII
// letters, digits, '_', '-' and '.'. The broker holds names to SQS's stricter rule; the
// catalog only keeps what no file name or URL path chokes on.
func ValidQueueName(name string) bool {
	if len(name) == 0 || len(name) > MaxQueueName || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// QueueNames returns the queues' names, sorted.
func (s *State) QueueNames() []string {
	names := make([]string, 0, len(s.Queues))
	for n := range s.Queues {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// applyQueue runs CreateQueue, DeleteQueue or UpdateQueue on s.
func (s *State) applyQueue(e multiraft.Entry, c *Command) Result {
	if !ValidQueueName(c.Name) {
		return Result{Err: fmt.Errorf("%w: %q", ErrInvalidQueueName, c.Name)}
	}
	q := s.Queues[c.Name]
	switch {
	case c.Op == OpCreateQueue && q != nil:
		return Result{Queue: q, Err: fmt.Errorf("%w: %q", ErrQueueExists, c.Name)}
	case c.Op != OpCreateQueue && q == nil:
		return Result{Err: fmt.Errorf("%w: %q", ErrUnknownQueue, c.Name)}
	}
	switch c.Op {
	case OpCreateQueue:
		rf := int(c.RF)
		if rf <= 0 {
			rf = min(DefaultReplicationFactor, len(s.Nodes))
		}
		if rf < 1 || rf > len(s.Nodes) {
			return Result{Err: fmt.Errorf("%w: %d replicas, %d nodes registered", ErrReplicationFactor, rf, len(s.Nodes))}
		}
		// Placed by the partitions' rule, as a one-partition topic of the same name.
		p := s.place(c.Name, 0, 1, rf)[0]
		nq := &Queue{Name: c.Name, Settings: bytes.Clone(c.Settings), Group: p.Group, Replicas: p.Replicas,
			Created: e.Index, Version: e.Index}
		s.Queues[c.Name] = nq
		return Result{Queue: nq}
	case OpDeleteQueue:
		delete(s.Queues, c.Name)
		return Result{}
	default: // OpUpdateQueue
		nq := *q
		nq.Settings, nq.Version = bytes.Clone(c.Settings), e.Index
		s.Queues[c.Name] = &nq
		return Result{Queue: &nq}
	}
}

// CreateQueue creates a queue with replicationFactor replicas (<= 0: min(3, registered
// nodes)) and returns it. A queue of that name already there is ErrQueueExists, returned
// with the existing queue, so the caller can answer an identical create as a success.
func (c *Catalog) CreateQueue(ctx context.Context, name string, replicationFactor int, settings []byte) (*Queue, error) {
	if err := checkQueue(name, settings); err != nil {
		return nil, err
	}
	if replicationFactor > MaxPartitions { // keeps it an int32
		return nil, fmt.Errorf("%w: %d replicas", ErrReplicationFactor, replicationFactor)
	}
	rf := int32(max(replicationFactor, 0))
	r, err := c.do(ctx, Command{Op: OpCreateQueue, Name: name, RF: rf, Settings: settings})
	return r.Queue, err
}

// DeleteQueue removes a queue from the catalog. Its group id is not reused.
func (c *Catalog) DeleteQueue(ctx context.Context, name string) error {
	if err := checkQueue(name, nil); err != nil {
		return err
	}
	_, err := c.do(ctx, Command{Op: OpDeleteQueue, Name: name})
	return err
}

// UpdateQueue replaces a queue's settings.
func (c *Catalog) UpdateQueue(ctx context.Context, name string, settings []byte) (*Queue, error) {
	if err := checkQueue(name, settings); err != nil {
		return nil, err
	}
	r, err := c.do(ctx, Command{Op: OpUpdateQueue, Name: name, Settings: settings})
	return r.Queue, err
}

func checkQueue(name string, settings []byte) error {
	if !ValidQueueName(name) {
		return fmt.Errorf("%w: %q (1..%d of [a-zA-Z0-9._-])", ErrInvalidQueueName, name, MaxQueueName)
	}
	if len(settings) > MaxSettings {
		return fmt.Errorf("meta: settings of %d bytes (max %d)", len(settings), MaxSettings)
	}
	return nil
}
