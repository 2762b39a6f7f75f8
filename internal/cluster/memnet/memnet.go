// Package memnet is an in-memory network for multiraft hosts in one process: the transport
// of the deterministic cluster tests and the benchmarks.
//
// It owns the batches in flight and the faults applied to them: per directed node pair it
// can cut (partition), drop, duplicate and delay (and so reorder) batches, each decided by
// one math/rand source seeded by the test, so a schedule of faults replays from its seed.
// Time is the network's own tick count (Advance), which the test moves in step with the
// hosts' ticks. A live network (NewLive) instead hands every batch over at once, for tests
// and benchmarks that run hosts on their own goroutines.
//
// It must never be linked into the server: it is test infrastructure that happens to live
// outside _test files so several packages' tests can share it. It imports nothing of
// sluice but multiraft's types.
package memnet

import (
	"cmp"
	"math/rand"
	"slices"
	"sync"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Receiver is what a node is on the network: a multiraft.Host.
type Receiver interface {
	Receive(multiraft.Batch)
}

// Faults are what a directed link does to the batches on it.
type Faults struct {
	Cut       bool    // everything is lost (a partition)
	Drop      float64 // probability that a batch is lost
	Duplicate float64 // probability that a batch is delivered twice
	// A batch is delivered after MinDelay..MaxDelay ticks (uniformly); batches with
	// different delays overtake each other.
	MinDelay, MaxDelay uint64
}

type link struct{ from, to multiraft.NodeID }

type inflight struct {
	due, seq uint64
	b        multiraft.Batch
}

// Stats count what the network did.
type Stats struct {
	Sent, Delivered, Dropped, Duplicated uint64
}

// Network is the in-memory network.
type Network struct {
	live bool

	mu    sync.Mutex // guards everything below
	rng   *rand.Rand
	now   uint64
	seq   uint64
	nodes map[multiraft.NodeID]Receiver
	def   Faults
	links map[link]Faults
	sides map[multiraft.NodeID]int // the partition in force (nil: none); 0 is no side
	queue []inflight
	stats Stats
	hook  RequestHook
}

// New returns a network whose fault decisions follow seed. Batches wait in the network
// until Deliver.
func New(seed int64) *Network {
	return &Network{rng: rand.New(rand.NewSource(seed)), nodes: map[multiraft.NodeID]Receiver{},
		links: map[link]Faults{}}
}

// NewLive returns a network that delivers each batch during Send (after Cut and Drop;
// delays and duplicates do not apply).
func NewLive(seed int64) *Network {
	n := New(seed)
	n.live = true
	return n
}

// Attach puts node id on the network, replacing whatever was attached as id (a restart).
func (n *Network) Attach(id multiraft.NodeID, r Receiver) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[id] = r
}

// Detach takes node id off the network (a crash): batches to it are lost.
func (n *Network) Detach(id multiraft.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.nodes, id)
}

// Transport returns the Transport node id sends through.
func (n *Network) Transport(id multiraft.NodeID) multiraft.Transport {
	return endpoint{n: n, from: id}
}

type endpoint struct {
	n    *Network
	from multiraft.NodeID
}

func (e endpoint) Send(b multiraft.Batch) {
	b.From = e.from
	e.n.send(b)
}

// SetDefault sets the faults of every link that has none of its own.
func (n *Network) SetDefault(f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.def = f
}

// SetLink sets the faults of the directed link from → to.
func (n *Network) SetLink(from, to multiraft.NodeID, f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links[link{from, to}] = f
}

// Partition cuts every link between nodes of different sides, both ways, until Heal;
// links within a side keep their faults. A node on no side (one attached later included)
// is cut from everyone. A later Partition replaces this one.
func (n *Network) Partition(sides ...[]multiraft.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sides = map[multiraft.NodeID]int{}
	for i, s := range sides {
		for _, id := range s {
			n.sides[id] = i + 1
		}
	}
}

// Heal ends the partition and removes every per-link setting: all links go back to the
// default faults.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sides = nil
	clear(n.links)
}

// Advance moves the network's clock one tick.
func (n *Network) Advance() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.now++
}

// Pending counts the batches in flight.
func (n *Network) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queue)
}

// Stats returns the network's counters.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

func (n *Network) faults(from, to multiraft.NodeID) Faults {
	f, ok := n.links[link{from, to}]
	if !ok {
		f = n.def
	}
	if n.sides != nil && (n.sides[from] == 0 || n.sides[from] != n.sides[to]) {
		f.Cut = true
	}
	return f
}

func (n *Network) send(b multiraft.Batch) {
	n.mu.Lock()
	n.stats.Sent++
	f := n.faults(b.From, b.To)
	if f.Cut || (f.Drop > 0 && n.rng.Float64() < f.Drop) {
		n.stats.Dropped++
		n.mu.Unlock()
		return
	}
	if n.live {
		r := n.nodes[b.To]
		n.stats.Delivered++
		n.mu.Unlock()
		if r != nil {
			r.Receive(b)
		}
		return
	}
	copies := 1
	if f.Duplicate > 0 && n.rng.Float64() < f.Duplicate {
		copies = 2
		n.stats.Duplicated++
	}
	for range copies {
		d := f.MinDelay
		if f.MaxDelay > f.MinDelay {
			d += uint64(n.rng.Int63n(int64(f.MaxDelay - f.MinDelay + 1)))
		}
		n.seq++
		n.queue = append(n.queue, inflight{due: n.now + d, seq: n.seq, b: b})
	}
	n.mu.Unlock()
}

// Deliver hands every batch that is due to its receiver, in (due tick, send order) order,
// and returns how many it delivered (batches to detached nodes are lost). Batches sent
// while it delivers wait for the next call.
func (n *Network) Deliver() int {
	n.mu.Lock()
	var due, rest []inflight
	for _, m := range n.queue {
		if m.due <= n.now {
			due = append(due, m)
		} else {
			rest = append(rest, m)
		}
	}
	n.queue = rest
	slices.SortFunc(due, func(a, b inflight) int {
		return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq))
	})
	rcv := make([]Receiver, len(due))
	for i, m := range due {
		rcv[i] = n.nodes[m.b.To]
		if rcv[i] == nil {
			n.stats.Dropped++
		} else {
			n.stats.Delivered++
		}
	}
	n.mu.Unlock()
	for i, m := range due {
		if rcv[i] != nil {
			rcv[i].Receive(m.b)
		}
	}
	return len(due)
}
