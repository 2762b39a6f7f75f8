package broker

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/storage"
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
// can be trimmed). Only offsets and deletions are durable; after a restart
// every group is Empty and members rejoin (see package group).
type groupRT struct {
	s   *streams
	dir string
	jr  *journal

	// mu guards coord, joins and syncs. It is held to
	// call the coordinator and to submit the events it returns, so the
	// journal holds them in the order they were applied; never across an
	// fdatasync.
	mu     sync.Mutex
	coord  *group.Coordinator
	joins  map[group.Ticket]chan group.JoinResult
	syncs  map[group.Ticket]chan group.SyncResult
	closed bool // joins and syncs are refused: nothing would answer them

	kick chan struct{} // a deadline may have moved (capacity 1)
	stop chan struct{} // closed by close: the ticker goroutine returns
	done chan struct{} // closed when it has
}

func openGroups(s *streams) (*groupRT, error) {
	o := s.b.opts
	g := &groupRT{
		s: s, dir: filepath.Join(o.Dir, "groups"),
		joins: map[group.Ticket]chan group.JoinResult{}, syncs: map[group.Ticket]chan group.SyncResult{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := vfs.MkdirAllDurable(o.FS, g.dir); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	jlog, syncEach, err := s.b.openJournalLog(filepath.Join(g.dir, "journal"))
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	replayed, err := g.load(jlog)
	if err != nil {
		jlog.Close()
		return nil, fmt.Errorf("groups: %w", err)
	}
	g.jr = newJournal(jlog, syncEach, func() int64 { return s.b.now().UnixMilli() },
		snapshotter{fs: o.FS, dir: g.dir, every: o.SnapshotEvery, warn: s.b.log.With("journal", "groups").Warn})
	g.jr.replayed(replayed)
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

// load rebuilds the coordinator's offsets from the snapshot and the journal,
// and returns how many journal events it replayed.
func (g *groupRT) load(jlog *storage.Log) (int, error) {
	g.coord = group.New(group.Config{Incarnation: incarnation()})
	from, snap, found, err := loadSnapshot(g.s.b.opts.FS, g.dir)
	if err != nil {
		return 0, err
	}
	if found {
		if err := g.applySnapshot(snap); err != nil {
			return 0, err
		}
	}
	if from < jlog.LogStartOffset() {
		return 0, fmt.Errorf("journal starts at %d, after the snapshot's %d", jlog.LogStartOffset(), from)
	}
	n := 0
	err = replayLog(jlog, from, func(off int64, v []byte) error {
		n++
		ev, err := group.UnmarshalEvent(v)
		if err == nil {
			err = g.coord.Apply(ev)
		}
		if err != nil {
			return fmt.Errorf("journal offset %d: %w", off, err)
		}
		return nil
	})
	return n, err
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

// snapshotLocked encodes every committed offset as events, one per group
// and commit time (so commit times survive). Called with mu held.
func (g *groupRT) snapshotLocked() ([]byte, error) {
	var buf []byte
	for _, sum := range g.coord.List() {
		byTime := map[int64]*group.Event{}
		var order []int64
		for _, o := range g.coord.Offsets(sum.Group) {
			ms := o.CommitTime.UnixMilli()
			ev := byTime[ms]
			if ev == nil {
				ev = &group.Event{Type: group.EventOffsetsCommitted, Group: sum.Group, Time: time.UnixMilli(ms)}
				byTime[ms] = ev
				order = append(order, ms)
			}
			ev.Offsets = append(ev.Offsets, o)
		}
		for _, ms := range order {
			b, err := byTime[ms].MarshalBinary()
			if err != nil {
				return nil, err
			}
			buf = binary.AppendUvarint(buf, uint64(len(b)))
			buf = append(buf, b...)
		}
	}
	return buf, nil
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
	if len(out.Events) == 0 {
		return nil
	}
	enc := make([][]byte, 0, len(out.Events))
	for _, ev := range out.Events {
		b, err := ev.MarshalBinary()
		if err != nil {
			ch := make(chan error, 1)
			ch <- err
			return ch
		}
		enc = append(enc, b)
	}
	return g.jr.record(enc, g.snapshotLocked)
}

// wait waits for a journal write. After a failure memory is ahead of disk,
// so the coordinator is rebuilt from the journal (members must rejoin).
func (g *groupRT) wait(ch <-chan error) error {
	if ch == nil {
		return nil
	}
	err := <-ch
	if err != nil {
		g.mu.Lock()
		if rerr := g.reloadLocked(); rerr != nil {
			g.s.b.log.Error("group coordinator reload failed", "err", rerr)
		}
		g.mu.Unlock()
	}
	return err
}

// reloadLocked rebuilds the coordinator from disk after a journal failure.
// Called with mu held.
func (g *groupRT) reloadLocked() error {
	if err := g.jr.log.Sync(); err != nil {
		return err
	}
	n, err := g.load(g.jr.log)
	if err != nil {
		return err
	}
	g.jr.reset()
	g.jr.replayed(n)
	// The new coordinator has no members: pending joins and syncs will
	// never complete, so their waiters hear now and rejoin.
	g.failWaitersLocked(group.ErrUnknownMember)
	for _, t := range g.s.topicList() {
		_, parts := t.snapshot()
		g.coord.SetPartitions(g.s.b.now(), t.name, int32(len(parts)))
	}
	return nil
}

// run calls Tick at the coordinator's next deadline (at most a second
// apart) until close.
func (g *groupRT) run() {
	defer close(g.done)
	for {
		g.mu.Lock()
		d, ok := g.coord.NextDeadline()
		g.mu.Unlock()
		wait := time.Second
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

// tick expires sessions and ends rebalances that ran out of time.
func (g *groupRT) tick() {
	g.mu.Lock()
	out := g.coord.Tick(g.s.b.now())
	ch := g.dispatchLocked(out)
	g.jr.maybeSnapshot(g.s.b.opts.SnapshotEvery/10, 0, g.snapshotLocked)
	g.mu.Unlock()
	if err := g.wait(ch); err != nil {
		g.s.b.log.Warn("group tick journal failed", "err", err)
	}
}

// offsetTopics lists the topics any group has committed offsets in.
func (g *groupRT) offsetTopics() []string {
	g.mu.Lock()
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
func (g *groupRT) setPartitions(topic string, n int32) {
	g.mu.Lock()
	ch := g.dispatchLocked(g.coord.SetPartitions(g.s.b.now(), topic, n))
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
	return g.jr.close()
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
