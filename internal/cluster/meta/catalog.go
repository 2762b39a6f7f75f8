package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Refusals: apply computed them (so every replica agrees), or the Catalog refused the
// call before proposing it.
var (
	ErrTopicExists      = errors.New("meta: topic already exists")
	ErrUnknownTopic     = errors.New("meta: unknown topic")
	ErrInvalidTopicName = errors.New("meta: invalid topic name")
	// ErrReplicationFactor: more replicas than registered nodes, or fewer than one after
	// defaulting (no node registered yet).
	ErrReplicationFactor = errors.New("meta: invalid replication factor")
	// ErrPartitions: a partition count out of 1..MaxPartitions, or an AddPartitions total
	// not larger than the topic's.
	ErrPartitions  = errors.New("meta: invalid partition count")
	ErrInvalidNode = errors.New("meta: invalid node")
)

// ErrNotLeader is matched (errors.Is) by every *NotLeaderError.
var ErrNotLeader = errors.New("meta: NOT_LEADER")

// ErrOutcomeUnknown: the command may or may not have been applied (the caller's context
// ended, the host stopped, or this node lost sight of the entry). Reading State tells.
var ErrOutcomeUnknown = errors.New("meta: outcome unknown")

// NotLeaderError: this node does not lead the metadata group. Leader is the node it
// believes does (0: unknown, an election is on): the caller retries there.
type NotLeaderError struct{ Leader multiraft.NodeID }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "meta: NOT_LEADER (leader unknown)"
	}
	return fmt.Sprintf("meta: NOT_LEADER (leader is node %d)", e.Leader)
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Catalog is the client API of the catalog on one node. Every change is proposed to the
// metadata group and returns once committed and applied on this node, with the result
// apply computed. Every call works on any node: a follower forwards the command to the
// leader (multiraft.ProposeForward) and returns once it sees the change applied here, or
// the refusal apply computed for it (kept on this node too: Origin names it); refusals
// (exists, unknown, too few partitions) are also checked against this node's State before
// the send, and a change someone else made meanwhile passes for this one's.
type Catalog struct {
	host *multiraft.Host
	sm   *Machine
	seq  atomic.Uint64
}

// NewCatalog serves the catalog of h, whose metadata group's state machine is m.
func NewCatalog(h *multiraft.Host, m *Machine) *Catalog {
	c := &Catalog{host: h, sm: m}
	// Request numbers start at a random point: after a restart the log replays this node's
	// earlier commands, whose numbers must not pass for the new process's.
	c.seq.Store(rand.Uint64() >> 1)
	return c
}

// RegisterNode adds a node or replaces its addresses. It works on any node, so a node can
// register itself at startup wherever the metadata group is led: on the leader it is an
// ordinary proposal; on a follower the command is forwarded to the leader
// (multiraft.ProposeForward) and RegisterNode returns once this node's State shows n. The
// host never retries a forward (one lost to a leader change is gone), so it is sent again
// every ForwardRetry until then, and while no leader is known it waits for one: repeating
// an upsert is harmless. Only the context ends the wait (ErrOutcomeUnknown).
func (c *Catalog) RegisterNode(ctx context.Context, n Node) error {
	if n.ID == 0 {
		return fmt.Errorf("%w: node id 0", ErrInvalidNode)
	}
	if len(n.KafkaAddr) > MaxAddr || len(n.HTTPAddr) > MaxAddr || len(n.SQSAddr) > MaxAddr {
		return fmt.Errorf("%w: an address longer than %d bytes", ErrInvalidNode, MaxAddr)
	}
	cmd := Command{Op: OpRegisterNode, Node: n}
	_, err := c.do(ctx, cmd)
	if !errors.Is(err, ErrNotLeader) {
		return err
	}
	return c.forward(ctx, cmd, func(s *State) bool {
		got, ok := s.Node(n.ID)
		return ok && got == n
	})
}

// ForwardRetry is how often a forwarded command is sent again (or, with no leader known,
// tried again) until this node sees it applied.
const ForwardRetry = 250 * time.Millisecond

// forward sends cmd to the leader from a follower until applied(State) holds after a send,
// or one of its sends was applied as a refusal (returned). Only idempotent commands may
// come here: a command may be applied more than once.
func (c *Catalog) forward(ctx context.Context, cmd Command, applied func(*State) bool) error {
	if err := c.checkOpLevel(&cmd); err != nil {
		return err
	}
	retry := time.NewTimer(0)
	defer retry.Stop()
	var sent []uint64 // the request numbers of every send: any of them may be applied
	for {
		changed := c.sm.Changed()
		if len(sent) > 0 && applied(c.sm.State()) {
			return nil
		}
		// The leader refused it (its State is newer than the check made here before the
		// send): its result is kept on this node too, under one of our request numbers.
		if err := c.sm.refusalOf(sent); err != nil {
			return err
		}
		select {
		case <-retry.C:
			cmd.Origin, cmd.Request = uint64(c.host.Node()), c.seq.Add(1)
			err := c.host.ProposeForward(Group, cmd.Encode(nil))
			switch {
			case err == nil:
				sent = append(sent, cmd.Request)
			case errors.Is(mapErr(err), ErrNotLeader), errors.Is(err, multiraft.ErrProposalDropped):
				// No leader known yet, or the leader refused it: try again.
			default:
				return mapErr(err)
			}
			retry.Reset(ForwardRetry)
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}
}

// CreateTopic creates a topic of partitions partitions (1..MaxPartitions) with
// replicationFactor replicas each (<= 0: min(3, registered nodes)), placed in apply
// (placement.go), and returns it.
func (c *Catalog) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int, settings []byte) (*Topic, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if partitions < 1 || partitions > MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions (1..%d)", ErrPartitions, partitions, MaxPartitions)
	}
	if len(settings) > MaxSettings {
		return nil, fmt.Errorf("meta: settings of %d bytes (max %d)", len(settings), MaxSettings)
	}
	if replicationFactor > MaxPartitions { // no cluster has that many nodes; keeps it an int32
		return nil, fmt.Errorf("%w: %d replicas", ErrReplicationFactor, replicationFactor)
	}
	rf := int32(max(replicationFactor, 0))
	cmd := Command{Op: OpCreateTopic, Name: name, Partitions: partitions, RF: rf, Settings: settings}
	r, err := c.do(ctx, cmd)
	if !errors.Is(err, ErrNotLeader) {
		return r.Topic, err
	}
	// On a follower: forwarded, and done once the topic is here. A topic this node
	// already sees exists; one created meanwhile by someone else is taken for this
	// create's (as two concurrent creates through Kafka's controller would race too).
	if st := c.sm.State(); st.Topics[name] != nil {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	} else if int(rf) > len(st.Nodes) || len(st.Nodes) == 0 {
		return nil, fmt.Errorf("%w: %d replicas, %d nodes registered", ErrReplicationFactor, rf, len(st.Nodes))
	}
	var t *Topic
	err = c.forward(ctx, cmd, func(s *State) bool {
		t = s.Topics[name]
		return t != nil
	})
	return t, err
}

// DeleteTopic removes a topic from the catalog. Its partitions' group ids are not reused.
func (c *Catalog) DeleteTopic(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	cmd := Command{Op: OpDeleteTopic, Name: name}
	_, err := c.do(ctx, cmd)
	if !errors.Is(err, ErrNotLeader) {
		return err
	}
	old := c.sm.State().Topics[name]
	if old == nil {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return c.forward(ctx, cmd, func(s *State) bool {
		t := s.Topics[name]
		return t == nil || t.ID != old.ID
	})
}

// AddPartitions grows a topic to total partitions, placing the new ones; existing
// partitions do not move.
func (c *Catalog) AddPartitions(ctx context.Context, name string, total int32) (*Topic, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if total < 1 || total > MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions (1..%d)", ErrPartitions, total, MaxPartitions)
	}
	cmd := Command{Op: OpAddPartitions, Name: name, Partitions: total}
	r, err := c.do(ctx, cmd)
	if !errors.Is(err, ErrNotLeader) {
		return r.Topic, err
	}
	t := c.sm.State().Topics[name]
	switch {
	case t == nil:
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	case int32(len(t.Partitions)) >= total:
		return nil, fmt.Errorf("%w: %s has %d partitions already", ErrPartitions, name, len(t.Partitions))
	}
	err = c.forward(ctx, cmd, func(s *State) bool {
		t = s.Topics[name]
		return t != nil && int32(len(t.Partitions)) >= total
	})
	return t, err
}

// UpdateTopic replaces a topic's settings.
func (c *Catalog) UpdateTopic(ctx context.Context, name string, settings []byte) (*Topic, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if len(settings) > MaxSettings {
		return nil, fmt.Errorf("meta: settings of %d bytes (max %d)", len(settings), MaxSettings)
	}
	cmd := Command{Op: OpUpdateTopic, Name: name, Settings: settings}
	r, err := c.do(ctx, cmd)
	if !errors.Is(err, ErrNotLeader) {
		return r.Topic, err
	}
	if c.sm.State().Topics[name] == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	var t *Topic
	err = c.forward(ctx, cmd, func(s *State) bool {
		t = s.Topics[name]
		return t == nil || bytes.Equal(t.Settings, settings)
	})
	if err == nil && t == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	return t, err
}

// Leader is the node leading the metadata group as this node sees it (0: unknown).
func (c *Catalog) Leader() multiraft.NodeID {
	st, err := c.host.Status(Group)
	if err != nil {
		return 0
	}
	return st.Leader
}

func checkName(name string) error {
	if !ValidTopicName(name) {
		return fmt.Errorf("%w: %q (1..%d of [a-zA-Z0-9._-], not \".\" or \"..\")", ErrInvalidTopicName, name, MaxTopicName)
	}
	return nil
}

// do proposes cmd and waits for this node to apply it.
func (c *Catalog) do(ctx context.Context, cmd Command) (Result, error) {
	wait, err := c.doAsync(cmd)
	if err != nil {
		return Result{}, err
	}
	return wait(ctx)
}

// doAsync proposes cmd; the function it returns waits for this node to apply it.
func (c *Catalog) doAsync(cmd Command) (func(context.Context) (Result, error), error) {
	if err := c.checkOpLevel(&cmd); err != nil {
		return nil, err
	}
	cmd.Origin = uint64(c.host.Node())
	cmd.Request = c.seq.Add(1)
	p, err := c.host.ProposeAsync(Group, cmd.Encode(nil))
	if err != nil {
		return nil, mapErr(err)
	}
	return func(ctx context.Context) (Result, error) { return c.await(ctx, p, cmd.Request) }, nil
}

// await waits for proposal p of request req to be applied on this node.
func (c *Catalog) await(ctx context.Context, p *multiraft.Proposal, req uint64) (Result, error) {
	select {
	case <-p.Done():
	case <-ctx.Done():
		select {
		case <-p.Done():
		default:
			return Result{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}
	index, err := p.Result()
	if err != nil {
		return Result{}, mapErr(err)
	}
	r, ok := c.sm.take(index, req)
	if !ok {
		return Result{}, fmt.Errorf("%w: entry %d applied without this node's result", ErrOutcomeUnknown, index)
	}
	return r, r.Err
}

// mapErr turns the host's errors into the catalog's: NOT_LEADER with the hint, and
// "outcome unknown" for everything after which the entry may still be committed.
func mapErr(err error) error {
	var nl *multiraft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return &NotLeaderError{Leader: nl.Leader}
	case errors.Is(err, multiraft.ErrProposalDropped):
		return err // not applied: safe to retry
	case errors.Is(err, multiraft.ErrOutcomeUnknown), errors.Is(err, multiraft.ErrStopped):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return err
}
