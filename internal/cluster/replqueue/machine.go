package replqueue

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

// ErrDeadLetterUnsupported: a queue.Config with MaxReceives set. The receive limit is not
// the machine's configuration (fixed at creation on every replica) but a field of each
// OpReceiveLimited, so a queue's redrive policy can change; the machine moves a message
// over the limit to its dead letters (dead.go), which the broker copies to the dead-letter
// queue's group.
var ErrDeadLetterUnsupported = errors.New("replqueue: MaxReceives is carried by each receive (OpReceiveLimited), not the machine's config")

// Message is a message as a Receive hands it out.
type Message struct {
	Offset int64 // the queue's own sequence of sends, from 0
	Body   []byte
	Attrs  []Attr
	SentAt time.Time // the stamped time of the Send that carried it
	Group  string    // FIFO message group (Put)
	Dedup  string    // the deduplication id it was sent with (Put)
}

// Delivery is one received message and its receipt.
type Delivery struct {
	Message
	Receipt         string
	ReceiveCount    int
	FirstReceivedAt time.Time // when it was first delivered (SQS's ApproximateFirstReceiveTimestamp)
	Deadline        time.Time
	// FencingToken grows with every delivery of the queue (queue.Delivery's), so a
	// downstream system can refuse a worker whose lease ran out.
	FencingToken uint64
}

// Result is what applying one command did, kept for the node that proposed it.
type Result struct {
	Request    uint64
	Offset     int64        // Send: the message's offset
	Deliveries []Delivery   // Receive
	Puts       []PutOutcome // Put
	Dead       int          // ReceiveLimited: messages moved to the dead letters
	Err        error        // the queue refused the command (a stale receipt, an out-of-range value)
}

type stored struct {
	body    []byte
	attrs   []Attr
	sentAt  int64 // unix ns
	availAt int64 // unix ns; 0: at once
	group   string
	dedup   string
}

func (s *stored) message(off int64) Message {
	return Message{Offset: off, Body: s.body, Attrs: s.attrs, SentAt: time.Unix(0, s.sentAt).UTC(),
		Group: s.group, Dedup: s.dedup}
}

// Machine is one queue's replicated state: a queue.Cursor driven only by committed
// commands, plus the bodies of messages not yet finished. It is a multiraft.StateMachine.
type Machine struct {
	node    uint64
	initial queue.Config // the times the queue was created with: a replay from the start begins with them
	cfg     queue.Config // as of the last applied entry (configure.go)

	mu      sync.Mutex // the host applies; API callers take results
	cur     *queue.Cursor
	msgs    map[int64]*stored
	next    int64                      // the next Send's offset
	now     int64                      // the latest applied time (unix ns): no command moves it back
	applied uint64                     // the last applied index
	results replcursor.Results[Result] // this node's commands' results (their own lock)
	dead    map[int64]*deadLetter      // dead.go
	dedup   dedupState                 // dedup.go

	// Snapshot pacing (SnapshotDue), owned by the Ready loop: the bytes of the entries
	// applied since the last snapshot taken or restored, and that snapshot's size.
	sinceSnap, lastSnap int64
}

var (
	_ multiraft.StateMachine  = (*Machine)(nil)
	_ multiraft.SnapshotPacer = (*Machine)(nil)
)

// NewMachine returns the empty state of a queue for node (whose proposals' results it keeps).
func NewMachine(node multiraft.NodeID, cfg queue.Config) (*Machine, error) {
	if cfg.MaxReceives != 0 {
		return nil, ErrDeadLetterUnsupported
	}
	cur, err := queue.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Machine{node: uint64(node), initial: cur.Config(), cfg: cur.Config(), cur: cur, msgs: map[int64]*stored{},
		dead: map[int64]*deadLetter{}, dedup: newDedupState()}, nil
}

// Apply applies committed commands in log order.
func (m *Machine) Apply(ents []multiraft.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range ents {
		c, err := Decode(e.Data)
		if err != nil {
			return fmt.Errorf("replqueue: entry %d: %w", e.Index, err)
		}
		r := m.apply(&c)
		if err := m.cur.Fault(); err != nil {
			return fmt.Errorf("replqueue: entry %d: cursor fault: %w", e.Index, err)
		}
		m.applied = e.Index
		m.sinceSnap += int64(len(e.Data))
		if c.Origin == m.node {
			r.Request = c.Request
			m.results.Keep(e.Index, c.Request, r)
		}
	}
	return nil
}

// SnapshotDue says whether the host takes the snapshot it would take now (every
// SnapshotEntries entries): once the entries applied since the last one weigh half its
// size. A snapshot encodes the whole backlog (snapshot.go), so taken every 10,000 entries
// of a queue holding a million messages of 1 KiB it wrote a GiB for each 10 MB applied and
// held the node's Ready loop about a second each time; paced, it writes at most twice what
// the entries did, and a restart re-applies at most half a snapshot's worth of entries. A
// small queue's snapshot is due at every interval, as before.
func (m *Machine) SnapshotDue() bool { return m.sinceSnap >= m.lastSnap/2 }

// The queue's cursor ops are replcursor's kinds (apply hands them over as they are): a
// difference either way overflows the byte type and fails the build.
const _ = (OpReceive - Op(replcursor.Receive)) + (Op(replcursor.Receive) - OpReceive) +
	(OpAck - Op(replcursor.Ack)) + (Op(replcursor.Ack) - OpAck) + (OpNack - Op(replcursor.Nack)) +
	(Op(replcursor.Nack) - OpNack) + (OpExtend - Op(replcursor.Extend)) + (Op(replcursor.Extend) - OpExtend)

// apply runs one command at its clamped time. Only committed state and the command decide
// the outcome, so every replica computes the same receipts and deadlines.
func (m *Machine) apply(c *Command) Result {
	m.now = max(m.now, c.Now.UnixNano())
	now := time.Unix(0, m.now).UTC()
	var r Result
	switch c.Op {
	case OpSend:
		if c.Delay > m.cfg.Retention {
			r.Err = errDelay(c.Delay, m.cfg.Retention)
			return r
		}
		// The entry's bytes belong to the host: keep a copy.
		s := &stored{body: bytes.Clone(c.Body), attrs: c.Attrs, sentAt: m.now}
		if c.Delay > 0 {
			s.availAt = m.now + int64(c.Delay)
		}
		r.Offset = m.next
		m.msgs[m.next] = s
		m.next++
	case OpReceive, OpReceiveLimited:
		m.receive(now, c, &r)
	case OpPut:
		r = m.put(c)
	case OpDeadDone:
		for _, off := range c.Offsets {
			delete(m.dead, off)
		}
	case OpPurge:
		m.forget(m.cur.Purge(now, m.next))
	case OpConfigure:
		r.Err = m.configure(now, c.Times)
	case OpNackReason:
		evs, err := m.cur.Nack(now, c.Receipt, c.Delay, c.Reason)
		m.forget(evs)
		r.Err = err
	default: // Ack, Nack, Extend: the cursor commands replpart's subscriptions share
		_, evs, err := replcursor.Run(m.cur, now, replcursor.Op{Kind: replcursor.Kind(c.Op), Max: c.Max,
			Timeout: c.Timeout, Delay: c.Delay, Receipt: c.Receipt})
		m.forget(evs)
		r.Err = err
	}
	m.fill(now)
	return r
}

func errDelay(d, limit time.Duration) error {
	return fmt.Errorf("%w: delay %v (max %v)", queue.ErrOutOfRange, d, limit)
}

// fill offers the cursor the stored messages from its read position, up to its lookahead
// window. Offsets missing from msgs are finished ones, which the cursor passes over.
func (m *Machine) fill(now time.Time) {
	for m.cur.Wants() > 0 && m.cur.ReadPos() < m.next {
		rp := m.cur.ReadPos()
		n := min(int64(m.cur.Wants()), m.next-rp)
		metas := make([]queue.Meta, 0, n)
		for off := rp; off < rp+n; off++ {
			meta := queue.Meta{Offset: off}
			if s := m.msgs[off]; s != nil {
				meta.GroupID = s.group
				meta.SentAt = time.Unix(0, s.sentAt).UTC()
				if s.availAt != 0 {
					meta.AvailableAt = time.Unix(0, s.availAt).UTC()
				}
			}
			metas = append(metas, meta)
		}
		used, evs := m.cur.Offer(now, metas)
		m.forget(evs)
		if used == 0 {
			return
		}
	}
}

// forget drops the bodies of messages the events finished.
func (m *Machine) forget(evs []queue.Event) {
	drop := func(a, b int64) {
		for off := a; off < b; off++ {
			delete(m.msgs, off)
		}
	}
	for _, ev := range evs {
		switch ev := ev.(type) {
		case queue.Acked:
			delete(m.msgs, ev.Offset)
		case queue.DeadLettered:
			delete(m.msgs, ev.Offset)
		case queue.Expired:
			drop(ev.From, ev.To)
		case queue.Skipped:
			drop(ev.From, ev.To)
		case queue.Purged:
			for off := range m.msgs {
				if off < ev.UpTo {
					delete(m.msgs, off)
				}
			}
		}
	}
}

// take removes and returns the result of this node's command at index with request req.
func (m *Machine) take(index, req uint64) (Result, bool) { return m.results.Take(index, req) }

// Now is the latest applied time: a proposer stamps no earlier time than this, and apply
// clamps to it anyway.
func (m *Machine) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Unix(0, m.now).UTC()
}

// Stats are what a replica holds, to compare replicas in tests.
type Stats struct {
	Applied uint64
	Next    int64 // offsets handed out
	Stored  int   // bodies kept (messages not finished)
	Floor   int64
	Dead    int // dead letters not yet copied
	Keys    int // deduplication keys remembered
}

// Stats returns the machine's counters.
func (m *Machine) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{Applied: m.applied, Next: m.next, Stored: len(m.msgs), Floor: m.cur.Floor(),
		Dead: len(m.dead), Keys: len(m.dedup.keys)}
}
