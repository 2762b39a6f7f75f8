package broker

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// groupRT wraps the pure consumer-group coordinator: one mutex serialises
// calls, the broker clock drives it, committed offsets are journaled (with
// group commit) before a commit is answered, and waiters receive the
// answers of asynchronous joins and syncs. A goroutine calls Tick at the
// coordinator's next deadline; Maintain calls it too (tests, fake clock).
//
// On disk, under Dir/groups/: journal/ (group events, a storage log) and
// snapshot (every committed offset as of a journal offset, so the journal
// can be trimmed). On a single node only offsets and deletions are durable;
// after a restart every group is Empty and members rejoin (see package
// group). In a cluster classic groups' membership is too.
type groupRT struct {
	machine
	s *streams

	// Guarded by mu, which is held to call the coordinator and to submit
	// the events it returns, so the journal holds them in the order they
	// were applied; never across an fdatasync.
	coord  *group.Coordinator
	joins  map[group.Ticket]chan group.JoinResult
	syncs  map[group.Ticket]chan group.SyncResult
	closed bool // joins and syncs are refused: nothing would answer them

	cl *clusterGroups // in a cluster: offsets go through the metadata group (cluster_groups.go)

	kick chan struct{} // a deadline may have moved (capacity 1)
	stop chan struct{} // closed by close: the ticker goroutine returns
	done chan struct{} // closed when it has
}

func openGroups(s *streams) (*groupRT, error) {
	b := s.b
	g := &groupRT{
		s:     s,
		joins: map[group.Ticket]chan group.JoinResult{}, syncs: map[group.Ticket]chan group.SyncResult{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	dir := filepath.Join(b.opts.Dir, "groups")
	if err := vfs.MkdirAllDurable(b.opts.FS, dir); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	err := b.openMachine(&g.machine, "the group coordinator", dir, b.log.With("journal", "groups"), machineHooks{
		fresh: func() (func(), error) {
			old := g.coord
			// In a cluster, membership is recorded too (group.Config.DurableMembership), so a
			// new controller keeps every group's members (cluster_groups.go), once every
			// node reads the records (cluster_features.go; until then the reconcile loop
			// turns them on). A single node does not: its restart often comes with its
			// clients' (one machine), and a recorded member that is gone would hold up
			// every new member's join until its session expired.
			g.coord = group.New(group.Config{Incarnation: incarnation(), Consumer: b.opts.ConsumerGroups,
				DurableMembership: b.cluster.recordsMembership()})
			return func() { g.coord = old }, nil
		},
		loader: journal.Loader{
			Restore: g.applySnapshot,
			Apply: func(off int64, v []byte) error {
				if len(v) == 0 { // forgetGroupsMark (cluster_groupstate.go)
					g.coord.Forget()
					return nil
				}
				ev, err := group.UnmarshalEvent(v)
				if err == nil {
					err = g.coord.Apply(ev)
				}
				if err != nil {
					return fmt.Errorf("journal offset %d: %w", off, err)
				}
				return nil
			},
		},
		snapshot: g.captureLocked,
		reloaded: g.reloadedLocked,
	})
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	go g.run()
	return g, nil
}

// incarnation is unique per broker start, so member ids handed out before
// a restart are never handed out again.
func incarnation() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// applySnapshot replays a snapshot body: events, each a uvarint length and an
// encoded group.Event.
func (g *groupRT) applySnapshot(rest []byte) error {
	for len(rest) > 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < n {
			return fmt.Errorf("snapshot: truncated")
		}
		ev, err := group.UnmarshalEvent(rest[k : k+int(n)])
		if err == nil {
			err = g.coord.Apply(ev)
		}
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		rest = rest[k+int(n):]
	}
	return nil
}

// captureLocked captures the coordinator's durable state for a snapshot
// (group.Coordinator.CaptureSnapshot: copy on write, so the groups' lock is
// not held while the events are built); the encoding it returns is the
// events that rebuild it, each a uvarint length and an encoded group.Event.
// Called with mu held.
func (g *groupRT) captureLocked() func() ([]byte, error) {
	build := g.coord.CaptureSnapshot
	if g.cl != nil {
		// In a cluster the coordinator's memory runs ahead of the journal (a change is
		// applied before its metadata entry commits): the snapshot is the journal's state.
		build = g.cl.journaled.CaptureSnapshot
	}
	events := build()
	return func() ([]byte, error) {
		var buf []byte
		for _, ev := range events() {
			b, err := ev.MarshalBinary()
			if err != nil {
				return nil, err
			}
			buf = binary.AppendUvarint(buf, uint64(len(b)))
			buf = append(buf, b...)
		}
		return buf, nil
	}
}

// dispatchLocked hands completed tickets to their waiters, journals the
// events and re-arms the ticker. It returns the channel that reports the
// events' durability (nil when there are none). Called with mu held.
func (g *groupRT) dispatchLocked(out group.Output) <-chan error {
	for _, r := range out.Joins {
		if ch := g.joins[r.Ticket]; ch != nil {
			ch <- r
			delete(g.joins, r.Ticket)
		}
	}
	for _, r := range out.Syncs {
		if ch := g.syncs[r.Ticket]; ch != nil {
			ch <- r
			delete(g.syncs, r.Ticket)
		}
	}
	select {
	case g.kick <- struct{}{}:
	default:
	}
	enc := make([][]byte, 0, len(out.Events))
	for _, ev := range out.Events {
		b, err := ev.MarshalBinary()
		if err != nil {
			return failed(err)
		}
		enc = append(enc, b)
	}
	g.cl.journaledLocked(out.Events)
	return g.recordLocked(enc)
}

// reloadedLocked runs after the coordinator was rebuilt from its journal
// (see machine): the new coordinator has no tickets, so pending joins and
// syncs will never complete, and their waiters hear now and rejoin. In a
// cluster it has the members recorded, whose sessions start now; a single
// node's has none. Called with mu held.
func (g *groupRT) reloadedLocked() {
	g.failWaitersLocked(group.ErrUnknownMember)
	g.resumeLocked()
}

// resume is resumeLocked for a coordinator just loaded at open.
func (g *groupRT) resume() {
	g.lockForRead()
	defer g.mu.Unlock()
	g.resumeLocked()
}

// resumeLocked gives a coordinator rebuilt from its journal the partition counts without
// rebalancing (its recorded groups were formed with them) and starts the recorded
// members' sessions now; a native group whose topic's count changed meanwhile rebalances.
// Called with mu held.
func (g *groupRT) resumeLocked() {
	for _, t := range g.s.topicList() {
		_, parts := t.snapshot()
		g.coord.KnowPartitions(t.name, int32(len(parts)))
	}
	out := g.coord.Resume(g.s.b.now())
	if g.s.b.cluster != nil {
		if members, _ := splitMembership(out.Events); len(members) > 0 && g.cl != nil && g.cl.leads() {
			// The controller getting ready (ready, reset). Its record commits, or the
			// group's next record replaces it: nobody waits.
			if _, err := g.cl.propose(members); err != nil {
				g.logger.Warn("group membership record not proposed", "err", err)
			}
		}
		out.Events = nil
	}
	g.dispatchLocked(out)
}

// run calls Tick at the coordinator's next deadline (at most a second
// apart) until close.
func (g *groupRT) run() {
	defer close(g.done)
	for {
		g.mu.Lock()
		d, ok := g.coord.NextDeadline()
		g.mu.Unlock()
		wait := untilAligned(time.Second)
		if ok {
			wait = min(max(d.Sub(g.s.b.now()), 10*time.Millisecond), time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-g.stop:
			t.Stop()
			return
		case <-g.kick:
			t.Stop()
		case <-t.C:
			g.tick()
		}
	}
}

// tick expires sessions and ends rebalances that ran out of time. After a
// journal failure it is what rebuilds an idle coordinator.
//
// In a cluster only the serving coordinator ticks: another node's members
// are the log's, not sessions it keeps (it is rebuilt before it serves),
// and their expiry must not reach its journal without the metadata group.
func (g *groupRT) tick() {
	if err := g.lockChecked(); err != nil {
		g.logger.Warn("group tick", "err", err)
		return
	}
	if g.s.b.cluster != nil && (g.cl == nil || !g.cl.serving()) {
		g.maintainLocked()
		g.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), coordinatorReadyTimeout)
	defer cancel()
	durable := g.persistLocked(ctx, g.coord.Tick(g.s.b.now()))
	g.maintainLocked()
	g.mu.Unlock()
	if err := durable(); err != nil {
		g.s.b.log.Warn("group tick not durable", "err", err)
	}
}

// offsetTopics lists the topics any group has committed offsets in.
func (g *groupRT) offsetTopics() []string {
	g.lockForRead()
	defer g.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, sum := range g.coord.List() {
		for _, o := range g.coord.Offsets(sum.Group) {
			if !seen[o.Topic] {
				seen[o.Topic] = true
				out = append(out, o.Topic)
			}
		}
	}
	return out
}

// setPartitions tells the coordinator a topic's partition count (0: gone);
// subscribed groups rebalance.
//
// In a cluster every node does this as it applies the catalog, and journals
// the offsets of a deleted topic itself; only the serving coordinator
// proposes the membership records (the rebalances) it causes.
func (g *groupRT) setPartitions(topic string, n int32) {
	g.lockForRead() // a partition count must reach the coordinator, whatever the disk does
	out := g.coord.SetPartitions(g.s.b.now(), topic, n)
	if g.s.b.cluster != nil {
		var members []group.Event
		members, out.Events = splitMembership(out.Events)
		if len(members) > 0 && g.cl != nil && g.cl.serving() {
			if _, err := g.cl.propose(members); err != nil {
				g.cl.uncommittedLocked(err)
			}
		}
	}
	ch := g.dispatchLocked(out)
	g.mu.Unlock()
	_ = g.wait(ch)
}

func (g *groupRT) close() error {
	close(g.stop)
	<-g.done
	g.mu.Lock()
	g.closed = true
	g.failWaitersLocked(ErrClosed)
	g.mu.Unlock()
	return g.machine.close()
}

// failWaitersLocked answers every pending join and sync with err. Called
// with mu held.
func (g *groupRT) failWaitersLocked(err error) {
	for t, ch := range g.joins {
		ch <- group.JoinResult{Ticket: t, Err: err, Generation: -1}
	}
	for t, ch := range g.syncs {
		ch <- group.SyncResult{Ticket: t, Err: err}
	}
	g.joins, g.syncs = map[group.Ticket]chan group.JoinResult{}, map[group.Ticket]chan group.SyncResult{}
}

// lockForRead takes mu for a query that has no error to answer with: after
// a journal failure it rebuilds the coordinator first, and if that fails
// too the query is answered from memory, which may still hold the events
// whose write failed.
func (g *groupRT) lockForRead() {
	g.mu.Lock()
	if err := g.checkLocked(); err != nil {
		g.logger.Warn("group query answered from memory", "err", err)
	}
}
