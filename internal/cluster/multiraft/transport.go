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
	C() <-chan struct{}
	Stop()
}

// NewTimeTicker ticks every d, from a time.Ticker.
func NewTimeTicker(d time.Duration) Ticker {
	t := &timeTicker{t: time.NewTicker(d), c: make(chan struct{}, 1), done: make(chan struct{})}
	go t.run()
	return t
}

type timeTicker struct {
	t    *time.Ticker
	c    chan struct{}
	done chan struct{}
}

func (t *timeTicker) run() {
	for {
		select {
		case <-t.t.C:
			select {
			case t.c <- struct{}{}:
			default: // a tick still unconsumed: ticks are a rate, not a count
			}
		case <-t.done:
			return
		}
	}
}

func (t *timeTicker) C() <-chan struct{} { return t.c }
func (t *timeTicker) Stop()              { t.t.Stop(); close(t.done) }

// ManualTicker ticks when told to: Tick blocks until the host's Run loop took the tick.
type ManualTicker struct{ c chan struct{} }

// NewManualTicker returns a ticker that only Tick advances.
func NewManualTicker() *ManualTicker { return &ManualTicker{c: make(chan struct{})} }

// Tick delivers one tick.
func (m *ManualTicker) Tick()              { m.c <- struct{}{} }
func (m *ManualTicker) C() <-chan struct{} { return m.c }
func (m *ManualTicker) Stop()              {}
