package multiraft

import (
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// NodeID names a node of the cluster. It is also the node's Raft replica ID in every group
// it hosts (one replica of a group per node), so it is never 0 (raft.None).
type NodeID uint64

// GroupID names a Raft group, cluster-wide.
type GroupID uint64

// Message is one raft message of one group.
type Message struct {
	Group GroupID
	Msg   raftpb.Message
	// Quiesce marks a heartbeat by which the group's leader tells a follower that the group
	// is idle and fully replicated: see quiesce.go.
	Quiesce bool
}

// Batch is what one node sends another in one go: messages of any number of groups. A
// Batch with no messages is the node-pair liveness beat (see liveness.go).
type Batch struct {
	From, To NodeID
	Messages []Message
}

// Transport carries batches between nodes. Its contract:
//   - Send never blocks on the network (it queues or drops) and may be called from the
//     host's Ready loop only; the host never reuses a Batch after handing it over.
//   - Delivery is best effort: batches may be lost, duplicated, delayed or reordered, and
//     Raft copes with all four. A transport should keep the messages of one batch together
//     and in order, but correctness does not depend on it.
//   - Whatever arrives is handed to the receiving node's Host.Receive, from any goroutine.
type Transport interface {
	Send(b Batch)
}

// Ticker is the host's clock: one value on C per tick. Production uses NewTimeTicker;
// tests use a ManualTicker or call Host.Tick themselves.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// NewTimeTicker ticks every d, on the wall clock's multiples of d: a Sleeper (sleep.go), so
// Run can skip the ticks in which no group is awake. Its ticks are numbered from the Unix
// epoch, so the nodes of a cluster (one clock, or clocks NTP keeps close) count the same
// tick at the same instant, and beat their peers together (Host.beatPhase). After the
// start it counts on the monotonic clock: a step of the wall clock moves no tick. It fires
// once per Until (Run arms it for every tick it wants): a tick Run has not taken is not
// queued, so ticks are a rate, not a count, as a time.Ticker's (since Go 1.23). It has no
// goroutine of its own: a relay woke one more goroutine per tick, 20 a second per node at
// idle.
func NewTimeTicker(d time.Duration) Ticker {
	now := time.Now()
	past := now.Sub(now.Truncate(d)) // Truncate strips the monotonic reading: a wall-clock remainder
	t := &timeTicker{start: now.Add(-past), epoch: uint64(now.Truncate(d).UnixNano() / int64(d)), d: d}
	t.timer = time.NewTimer(d - past)
	return t
}

type timeTicker struct {
	start time.Time // tick epoch+n is due at start + n×d (start keeps now's monotonic reading)
	epoch uint64    // the tick due at start, counted from the Unix epoch
	d     time.Duration
	timer *time.Timer
}

func (t *timeTicker) C() <-chan time.Time { return t.timer.C }
func (t *timeTicker) Stop()               { t.timer.Stop() }
func (t *timeTicker) Now() uint64         { return t.epoch + uint64(time.Since(t.start)/t.d) }

// Until re-arms the timer for tick n's instant (Reset drops a value not yet taken, since
// Go 1.23, so C never carries a stale tick).
func (t *timeTicker) Until(n uint64) {
	if n < t.epoch {
		n = t.epoch
	}
	t.timer.Reset(time.Until(t.start.Add(time.Duration(n-t.epoch) * t.d)))
}

// ManualTicker ticks when told to: Tick blocks until the host's Run loop took the tick.
type ManualTicker struct{ c chan time.Time }

// NewManualTicker returns a ticker that only Tick advances.
func NewManualTicker() *ManualTicker { return &ManualTicker{c: make(chan time.Time)} }

// Tick delivers one tick.
func (m *ManualTicker) Tick()               { m.c <- time.Time{} }
func (m *ManualTicker) C() <-chan time.Time { return m.c }
func (m *ManualTicker) Stop()               {}
