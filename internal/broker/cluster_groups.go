package broker

// Consumer groups in a cluster (docs/cluster.md, "Consumer groups").
//
// One node coordinates every group: the controller (the metadata group's leader), which
// FindCoordinator names. Sessions (heartbeats) live in its memory only. Every change of
// committed offsets (a commit, a reset, an offset deletion, a group deletion, and a group's
// protocol type) and of a classic group's membership (group.Config.DurableMembership) is
// proposed by it to the metadata group as one opaque meta.OpGroupOffsets command (the
// coordinator's events, encoded below), and the call answers once that entry is committed
// and applied here; a Stable generation's syncs are answered when its record applies
// (group.Coordinator.Stored). Every node applies the entry to
// its own coordinator and journals it (clusterGroups.ApplyGroupOffsets), so whichever node
// becomes controller already holds the offsets. A node that is not the controller answers
// every group request with NotCoordinatorError (Kafka's NOT_COORDINATOR): members never
// split across two coordinators. A node that becomes controller first commits a barrier
// (so it has applied everything committed before its term) and rebuilds its coordinator
// from its journal: the recorded members and generations survive, with fresh sessions
// (group.Coordinator.Resume), and nothing applied ahead of a commit does.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/group"
)

// ErrNotCoordinator is matched (errors.Is) by every *NotCoordinatorError.
var ErrNotCoordinator = errors.New("not the group coordinator")

// ErrCoordinatorNotAvailable: this node leads the metadata group but could not commit a
// group change or get ready to coordinate (an election under way, a commit of unknown
// outcome). Kafka's COORDINATOR_NOT_AVAILABLE: clients find the coordinator again and
// retry.
var ErrCoordinatorNotAvailable = errors.New("the group coordinator is not available")

// NotCoordinatorError: in a cluster, this node does not coordinate consumer groups; the
// controller does (Coordinator, 0 when unknown). Kafka's NOT_COORDINATOR.
type NotCoordinatorError struct{ Coordinator int32 }

func (e *NotCoordinatorError) Error() string {
	if e.Coordinator == 0 {
		return "this node is not the group coordinator and no controller is known (an election is under way)"
	}
	return fmt.Sprintf("this node is not the group coordinator: node %d (the controller) is", e.Coordinator)
}

func (e *NotCoordinatorError) Is(target error) bool { return target == ErrNotCoordinator }

// coordinatorReadyTimeout bounds the barrier a new controller commits before it serves
// groups.
const coordinatorReadyTimeout = 10 * time.Second

// clusterGroups is the cluster side of the group coordinator: the metadata group's hook
// (meta.GroupOffsets) and the coordinator's readiness.
type clusterGroups struct {
	g   *groupRT
	cat *meta.Catalog

	// journaled is a coordinator fed only what this node journals (every applied entry,
	// and the local events dispatchLocked journals): the journal's state, without what the
	// coordinator applied ahead of a commit. The group journal's snapshots encode it, so a
	// change whose entry never commits cannot reach the disk. Guarded by g.mu.
	journaled *group.Coordinator

	readyTerm atomic.Uint64 // the metadata term the coordinator was made ready in; 0: not ready
	readyMu   sync.Mutex    // one barrier at a time
	reads     readBarriers  // the barriers of linearizable reads (cluster_groups_read.go)

	// umu guards unsynced, waited and syncErr: the hook's journal writes not yet seen
	// durable, oldest first; how many of the earlier ones a Checkpoint is waiting for; and
	// the first that failed. Taken after g.mu, never before it. cmu makes Checkpoints one
	// at a time (the metadata snapshot's encoding calls it beside reset's), so a
	// Checkpoint that returns knows every write queued before it durable.
	umu      sync.Mutex
	unsynced []<-chan error
	waited   int
	syncErr  error
	cmu      sync.Mutex
}

var _ meta.GroupOffsets = (*clusterGroups)(nil)

// openClusterGroups registers the broker's coordinator as the metadata group's hook; the
// host may have applied offsets already (a restart re-applies the log's tail), and the
// machine hands them over now.
func (b *Broker) openClusterGroups(o *ClusterOptions) error {
	g := b.streams.groups
	c := newClusterGroups(g, o.Catalog)
	if err := o.Meta.SetGroupOffsets(c); err != nil {
		return fmt.Errorf("broker: consumer-group offsets: %w", err)
	}
	return nil
}

// newClusterGroups puts g in a cluster. Nothing was applied ahead of a commit yet (no
// member joined), so the coordinator's state is the journal's.
func newClusterGroups(g *groupRT, cat *meta.Catalog) *clusterGroups {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &clusterGroups{g: g, cat: cat, journaled: group.New(group.Config{DurableMembership: true})}
	for _, ev := range g.coord.Snapshot() {
		_ = c.journaled.Apply(ev) // the coordinator's own events: valid
	}
	g.cl = c
	return c
}

// journaledLocked feeds the events this node journals to the journal's coordinator (nil
// c: a single node, whose coordinator is the journal's). Called with g.mu held.
func (c *clusterGroups) journaledLocked(evs []group.Event) {
	if c == nil {
		return
	}
	for _, ev := range evs {
		_ = c.journaled.Apply(ev) // applied to the coordinator already: valid
	}
}

// CheckCoordinator returns nil if this node coordinates consumer groups now: always for
// a single node; in a cluster, when it is the controller and ready (it may first commit
// a barrier and rebuild its coordinator, once per term). Otherwise a *NotCoordinatorError
// or ErrCoordinatorNotAvailable. Every group call checks it; the Kafka front-end also
// checks before the reads (OffsetFetch, DescribeGroups, ListGroups).
func (b *Broker) CheckCoordinator(ctx context.Context) error {
	if b.cluster == nil {
		return nil
	}
	g, err := b.groups()
	if err != nil {
		return err
	}
	if g.cl == nil {
		return ErrClosed
	}
	return g.cl.ready(ctx)
}

func (c *clusterGroups) ready(ctx context.Context) error {
	term, leader := c.cat.Term()
	if !leader {
		return c.notCoordinator()
	}
	if c.readyTerm.Load() == term {
		return nil
	}
	c.readyMu.Lock()
	defer c.readyMu.Unlock()
	if c.readyTerm.Load() == term {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, coordinatorReadyTimeout)
	defer cancel()
	// Applied here: every entry committed before the barrier, whatever term proposed it.
	if err := c.cat.ProposeGroupOffsets(ctx, nil); err != nil {
		return c.mapErr(err)
	}
	if err := c.reset(); err != nil {
		return fmt.Errorf("%w: rebuilding the coordinator: %w", ErrCoordinatorNotAvailable, err)
	}
	if t, l := c.cat.Term(); !l || t != term {
		return c.notCoordinator()
	}
	c.readyTerm.Store(term)
	c.g.logger.Info("coordinating the consumer groups: rebuilt from the metadata log", "term", term)
	return nil
}

// leads reports whether this node leads the metadata group (ready or not).
func (c *clusterGroups) leads() bool {
	if c.cat == nil {
		return false
	}
	_, leader := c.cat.Term()
	return leader
}

// serving reports whether this node coordinates groups in the metadata group's current
// term (ready was called in it and no proposal failed since).
func (c *clusterGroups) serving() bool {
	if c.cat == nil { // a test's hook without a metadata group
		return false
	}
	term, leader := c.cat.Term()
	return leader && c.readyTerm.Load() == term
}

func (c *clusterGroups) notCoordinator() error {
	return &NotCoordinatorError{Coordinator: int32(c.cat.Leader())}
}

// mapErr turns a failed proposal into the coordinator's error.
func (c *clusterGroups) mapErr(err error) error {
	if errors.Is(err, meta.ErrNotLeader) {
		return c.notCoordinator()
	}
	return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
}

// reset rebuilds the coordinator from the journal: no member, generation or uncommitted
// offset survives, only what the metadata group applied. The journal must first hold
// every applied entry (a reload drops writes still queued), so it waits for them with
// g.mu free, then reloads under g.mu once nothing new was queued meanwhile.
func (c *clusterGroups) reset() error {
	for range 100 {
		if err := c.Checkpoint(); err != nil {
			return err
		}
		c.g.mu.Lock()
		if c.notDurable() == 0 {
			err := c.g.reloadLocked()
			c.g.mu.Unlock()
			return err
		}
		c.g.mu.Unlock()
	}
	return errors.New("the journal never caught up with the metadata group")
}

// persistLocked dispatches out and returns the wait for its events to be durable: the
// local journal's fsync on a single node; in a cluster, the metadata group's commit of
// one entry carrying them (proposed here, under g.mu, so entries follow the order the
// coordinator applied them in). The events are journaled when the entry is applied, on
// every node. Called with g.mu held; call the wait without it.
func (g *groupRT) persistLocked(ctx context.Context, out group.Output) func() error {
	if g.cl == nil {
		ch := g.dispatchLocked(out)
		return func() error { return g.wait(ch) }
	}
	evs := out.Events
	out.Events = nil
	g.dispatchLocked(out) // the tickets' waiters and the ticker; nothing to journal
	if len(evs) == 0 {
		return func() error { return nil }
	}
	wait, err := g.cl.propose(evs)
	if err != nil {
		err = g.cl.uncommittedLocked(err)
		return func() error { return err }
	}
	return func() error {
		if err := wait(ctx); err != nil {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.cl.uncommittedLocked(err)
		}
		return nil
	}
}

// propose puts one entry carrying evs in the metadata log (called with g.mu held, so
// entries follow the order the coordinator applied them in).
func (c *clusterGroups) propose(evs []group.Event) (func(context.Context) error, error) {
	payload, err := encodeGroupEvents(evs)
	if err != nil {
		return nil, err
	}
	return c.cat.ProposeGroupOffsetsAsync(payload, groupEventsLevel(evs))
}

// uncommitted answers a change that was not committed (or may not be): memory holds it,
// the metadata group may not, so the coordinator is rebuilt before it serves again. The
// joins and syncs waiting (a Stable generation's, until its record applies) hear the
// error now rather than at the rebuild: Kafka clients find the coordinator and retry.
// Called with g.mu held.
func (c *clusterGroups) uncommittedLocked(err error) error {
	c.readyTerm.Store(0)
	err = c.mapErr(err)
	c.g.failWaitersLocked(err)
	return err
}

// splitMembership separates membership records (classic and consumer groups') from the
// other events.
func splitMembership(evs []group.Event) (members, rest []group.Event) {
	for _, ev := range evs {
		if ev.Membership() {
			members = append(members, ev)
		} else {
			rest = append(rest, ev)
		}
	}
	return members, rest
}

// ApplyGroupOffsets applies one committed entry's events to this node's coordinator and
// queues them to its journal (meta.GroupOffsets; the metadata group's Ready loop).
// Replaying an event is harmless (group.Coordinator.Apply), so the log's tail that a
// restart re-applies over a journal that already holds it ends in the same state.
func (c *clusterGroups) ApplyGroupOffsets(index uint64, payload []byte) error {
	evs, raws, err := decodeGroupEvents(payload)
	if err != nil {
		return err
	}
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	members, _ := splitMembership(evs)
	serving := len(members) > 0 && c.serving()
	for _, ev := range evs {
		if ev.Membership() && serving {
			// Proposed here: memory holds it and maybe more since. A Stable
			// generation's record now answers the syncs and joins it held.
			if ev.Members != nil && ev.Members.State == group.Stable {
				g.dispatchLocked(g.coord.Stored(g.s.b.now(), ev.Group, ev.Members.Generation))
			}
			continue
		}
		if err := g.coord.Apply(ev); err != nil {
			return err
		}
	}
	c.journaledLocked(evs)
	c.unsyncedLocked(g.recordLocked(raws))
	return nil
}

// unsyncedLocked keeps a journal write's durability for the next Checkpoint (nil: nothing
// was written). Called with g.mu held.
func (c *clusterGroups) unsyncedLocked(ch <-chan error) {
	if ch == nil {
		return
	}
	c.umu.Lock()
	defer c.umu.Unlock()
	for len(c.unsynced) > 0 { // drop the writes already done, so the list stays short
		select {
		case err := <-c.unsynced[0]:
			c.noteLocked(err)
			c.unsynced = c.unsynced[1:]
			continue
		default:
		}
		break
	}
	c.unsynced = append(c.unsynced, ch)
}

// Checkpoint waits until every event applied so far is durable in the journal
// (meta.GroupOffsets: before each snapshot of the metadata group). Once a journal write
// failed it fails forever: the entries after the last good snapshot are applied again at
// restart. It waits without umu, so the Ready loop goes on journaling meanwhile (the
// metadata snapshot's encoding calls it off the loop, meta/capture.go).
func (c *clusterGroups) Checkpoint() error {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	c.umu.Lock()
	waits := c.unsynced
	c.unsynced, c.waited = nil, len(waits)
	c.umu.Unlock()
	for _, ch := range waits {
		err := <-ch
		c.umu.Lock()
		c.noteLocked(err)
		c.waited--
		c.umu.Unlock()
	}
	c.umu.Lock()
	defer c.umu.Unlock()
	return c.syncErr
}

// notDurable counts the journal writes not known durable: queued, or waited for by a
// Checkpoint.
func (c *clusterGroups) notDurable() int {
	c.umu.Lock()
	defer c.umu.Unlock()
	return len(c.unsynced) + c.waited
}

func (c *clusterGroups) noteLocked(err error) {
	if err != nil && c.syncErr == nil {
		c.syncErr = err
	}
}

// groupEventsVersion is a group-offsets payload's first byte.
const groupEventsVersion = 1

// maxGroupEvents bounds the events of one payload (a commit of every partition of many
// topics is one event per group).
const maxGroupEvents = 1 << 16

// encodeGroupEvents encodes the payload of one meta.OpGroupOffsets entry:
//
//	version(1)=1 n(uvarint, >= 1) {len(uvarint, >= 1) event}...
//
// where each event is group.Event.MarshalBinary's encoding, as the journal holds it.
func encodeGroupEvents(evs []group.Event) ([]byte, error) {
	raws := make([][]byte, 0, len(evs))
	for _, ev := range evs {
		e, err := ev.MarshalBinary()
		if err != nil {
			return nil, err
		}
		raws = append(raws, e)
	}
	b := appendGroupEvents(nil, raws)
	if len(b) > meta.MaxGroupOffsets {
		return nil, fmt.Errorf("%w: a group change of %d bytes (max %d)", ErrCoordinatorNotAvailable, len(b), meta.MaxGroupOffsets)
	}
	return b, nil
}

// appendGroupEvents appends the payload of events already encoded (raws).
func appendGroupEvents(b []byte, raws [][]byte) []byte {
	b = binary.AppendUvarint(append(b, groupEventsVersion), uint64(len(raws)))
	for _, e := range raws {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// errBadGroupEvents: a payload that is not one well-formed list of events.
var errBadGroupEvents = errors.New("broker: malformed group-offsets payload")

// decodeGroupEvents parses a payload into events and their encodings (copied: the
// journal keeps them after the entry is gone). Anything malformed, trailing bytes
// included, is errBadGroupEvents.
func decodeGroupEvents(b []byte) ([]group.Event, [][]byte, error) {
	if len(b) < 1 || b[0] != groupEventsVersion {
		return nil, nil, fmt.Errorf("%w: no version %d", errBadGroupEvents, groupEventsVersion)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > maxGroupEvents || n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: event count", errBadGroupEvents)
	}
	b = b[k:]
	evs, raws := make([]group.Event, 0, n), make([][]byte, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l == 0 || l > uint64(len(b)-k) {
			return nil, nil, fmt.Errorf("%w: event length", errBadGroupEvents)
		}
		raw := append([]byte(nil), b[k:k+int(l)]...)
		ev, err := group.UnmarshalEvent(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", errBadGroupEvents, err)
		}
		evs, raws = append(evs, ev), append(raws, raw)
		b = b[k+int(l):]
	}
	if len(b) > 0 {
		return nil, nil, fmt.Errorf("%w: %d trailing bytes", errBadGroupEvents, len(b))
	}
	return evs, raws, nil
}
