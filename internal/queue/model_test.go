package queue

import (
	"errors"
	"fmt"
	"math/rand"
	"time"
)

// model is the reference the cursor is checked against: the seed's WorkQueue (a list of
// messages scanned in send order on every receive), extended with FIFO groups, dead letters,
// delays, nacks and extensions. It is deliberately naive: O(messages) per call, no indexes,
// no journal. A crash of the broker is invisible to it, which is the property under test.
type model struct {
	cfg   Config // with defaults
	msgs  []*mMsg
	token uint64
	dead  []int64
}

type mMsg struct {
	off      int64
	group    string
	sentAt   time.Time
	visible  time.Time // hidden until then: send delay, nack delay or visibility deadline
	inFlight bool
	count    int
	token    uint64
	firstAt  time.Time
	lastAt   time.Time
	reason   string
	done     bool
}

func (m *model) send(meta Meta) {
	m.msgs = append(m.msgs, &mMsg{off: meta.Offset, group: meta.GroupID, sentAt: meta.SentAt, visible: meta.AvailableAt})
}

// receive is the seed's scan: first visible message wins, a message that used up its receives
// is parked as a dead letter. FIFO: only the first unfinished message of a group may go.
func (m *model) receive(now time.Time, max int, vis time.Duration) (ds []Delivery, dead []DeadLettered) {
	if vis == 0 {
		vis = m.cfg.Visibility
	}
	blocked := map[string]bool{}
	for _, x := range m.msgs {
		if len(ds) >= max {
			break
		}
		if x.done || (m.cfg.FIFO && blocked[x.group]) {
			continue
		}
		if x.visible.After(now) {
			blocked[x.group] = true
			continue
		}
		if m.cfg.MaxReceives > 0 && x.count >= m.cfg.MaxReceives {
			x.done = true
			m.dead = append(m.dead, x.off)
			dead = append(dead, DeadLettered{Offset: x.off, Count: x.count, FirstAt: x.firstAt, LastAt: x.lastAt,
				SentAt: x.sentAt, GroupID: x.group, Reason: x.reason})
			continue
		}
		blocked[x.group] = true
		m.token++
		x.count++
		x.token = m.token
		if x.firstAt.IsZero() {
			x.firstAt = now
		}
		x.lastAt, x.visible, x.inFlight = now, now.Add(vis), true
		ds = append(ds, Delivery{Offset: x.off, ReceiveCount: x.count, FirstReceivedAt: x.firstAt,
			Deadline: x.visible, FencingToken: x.token, GroupID: x.group, SentAt: x.sentAt})
	}
	m.compact()
	return ds, dead
}

// find returns the message a receipt names if the receipt is current, else the error class.
func (m *model) find(r Receipt) (*mMsg, error) {
	for _, x := range m.msgs {
		if x.off == r.Offset && !x.done && x.token == r.Token {
			return x, nil
		}
	}
	return nil, ErrReceiptStale
}

func (m *model) ack(r Receipt) error {
	x, err := m.find(r)
	if err == nil {
		x.done = true
		m.compact()
	}
	return err
}

func (m *model) nack(now time.Time, r Receipt, delay time.Duration, reason string) error {
	x, err := m.find(r)
	if err == nil {
		x.visible, x.inFlight, x.reason = now.Add(delay), false, reason
	}
	return err
}

func (m *model) extend(now time.Time, r Receipt, d time.Duration) error {
	x, err := m.find(r)
	switch {
	case err != nil:
		return err
	case !x.inFlight || !x.visible.After(now):
		return ErrNotInFlight
	case now.Add(d).Sub(x.lastAt) > m.cfg.MaxExtension:
		return ErrExtensionLimit
	}
	x.visible = now.Add(d)
	return nil
}

func (m *model) purge() {
	for _, x := range m.msgs {
		x.done = true
	}
	m.compact()
}

// compact forgets finished messages at the front, keeping the model's scans short.
func (m *model) compact() {
	i := 0
	for i < len(m.msgs) && m.msgs[i].done {
		i++
	}
	m.msgs = m.msgs[i:]
}

// lowestOpen is the first unfinished message's offset, or end when all are finished.
func (m *model) lowestOpen(end int64) int64 {
	for _, x := range m.msgs {
		if !x.done {
			return x.off
		}
	}
	return end
}

func (m *model) inFlight(now time.Time) int {
	n := 0
	for _, x := range m.msgs {
		if !x.done && x.inFlight && x.visible.After(now) {
			n++
		}
	}
	return n
}

// errClass maps an error to the sentinel both sides must agree on.
func errClass(err error) error {
	for _, s := range []error{ErrReceiptInvalid, ErrReceiptStale, ErrNotInFlight, ErrExtensionLimit, ErrOutOfRange} {
		if errors.Is(err, s) {
			return s
		}
	}
	if err != nil {
		return fmt.Errorf("unclassified: %w", err)
	}
	return nil
}

// randomConfig picks a queue shape for one seed. A standard queue may use a lookahead as small
// as the largest receive, which the model cannot tell apart; FIFO uses a window larger than the
// log, since its head-of-line limit is a deliberate difference tested on its own.
func randomConfig(rng *rand.Rand) Config {
	cfg := Config{
		FIFO:        rng.Intn(2) == 0,
		MaxReceives: []int{0, 1, 2, 3, 5}[rng.Intn(5)],
		Visibility:  []time.Duration{10 * time.Second, 30 * time.Second}[rng.Intn(2)],
		Retention:   MaxRetention, // retention has its own tests; the model never ages out
	}
	cfg.MaxExtension = []time.Duration{time.Minute, 5 * time.Minute, 12 * time.Hour}[rng.Intn(3)]
	cfg.Lookahead = 1 << 16
	if !cfg.FIFO {
		cfg.Lookahead = []int{maxBatch, 32, 1 << 16}[rng.Intn(3)]
	}
	return cfg
}

const maxBatch = 10
