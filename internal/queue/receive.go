package queue

import (
	"fmt"
	"strings"
	"time"
)

// Receive hands out up to max visible messages, lowest offset first, hiding each for
// visibility (0 means Config.Visibility). Lowest offset first means a message whose
// visibility ran out goes before newer ones, which keeps the floor moving and matches the
// seed's WorkQueue; it still reorders a standard queue, since the redelivery comes after
// newer messages that were handed out meanwhile.
//
// A visible message that already had Config.MaxReceives deliveries is not delivered: a
// DeadLettered event carries what the broker copies to the dead-letter queue, and the cursor
// treats the message as finished. The broker must make the DLQ copy durable before it
// journals that event; a crash in between dead-letters it again (at most duplicated).
// A message past retention is dropped (Expired) instead of delivered.
func (c *Cursor) Receive(now time.Time, max int, visibility time.Duration) ([]Delivery, []Event, error) {
	if visibility == 0 {
		visibility = c.cfg.Visibility
	}
	if visibility < 0 || visibility > c.cfg.MaxExtension {
		return nil, nil, fmt.Errorf("%w: visibility %v (max %v)", ErrOutOfRange, visibility, c.cfg.MaxExtension)
	}
	t := tn(now)
	var out []Delivery
	var evs []Event
	for len(out) < max {
		// Finishing a FIFO head can make the next one in its group due in this same call.
		c.promote(t)
		e := c.ready.peek()
		if e == nil {
			break
		}
		var ev Event
		switch {
		case c.expired(e.sentAt, t):
			ev = Expired{From: e.off, To: e.off + 1}
		case c.cfg.MaxReceives > 0 && int(e.count) >= c.cfg.MaxReceives:
			ev = DeadLettered{Offset: e.off, Count: int(e.count), FirstAt: nt(e.firstAt), LastAt: nt(e.lastAt),
				SentAt: nt(e.sentAt), GroupID: e.group, Reason: e.reason}
		default:
			d := Delivered{Offset: e.off, Token: c.token + 1, Count: int(e.count) + 1, At: now,
				Deadline: now.Add(visibility), FirstAt: nt(e.firstAt), SentAt: nt(e.sentAt), GroupID: e.group}
			if e.firstAt == 0 {
				d.FirstAt = now
			}
			ev = d
			out = append(out, d.delivery())
		}
		c.mustApply(ev)
		evs = append(evs, ev)
	}
	return out, evs, nil
}

func (d Delivered) delivery() Delivery {
	return Delivery{
		Offset: d.Offset, Receipt: Receipt{Offset: d.Offset, Token: d.Token}.String(),
		ReceiveCount: d.Count, FirstReceivedAt: d.FirstAt, Deadline: d.Deadline,
		FencingToken: d.Token, GroupID: d.GroupID, SentAt: d.SentAt,
	}
}

// current finds the message a receipt names, if the receipt is still the latest one.
//
// A receipt stays current until the message is delivered again or finished. So an Ack or
// Nack whose visibility ran out still works while nobody else has received the message (as
// SQS lets DeleteMessage through): the work is done, and refusing would only force a useless
// duplicate. Extend additionally needs the delivery to be in flight.
func (c *Cursor) current(receipt string) (*entry, error) {
	r, err := ParseReceipt(receipt)
	if err != nil {
		return nil, err
	}
	e := c.msgs[r.Offset]
	if e == nil || e.count == 0 || e.token != r.Token {
		return nil, fmt.Errorf("%w: offset %d token %d", ErrReceiptStale, r.Offset, r.Token)
	}
	return e, nil
}

// Ack finishes the message named by a current receipt.
func (c *Cursor) Ack(now time.Time, receipt string) ([]Event, error) {
	c.promote(tn(now))
	e, err := c.current(receipt)
	if err != nil {
		return nil, err
	}
	ev := Acked{Offset: e.off}
	c.mustApply(ev)
	return []Event{ev}, nil
}

// Extend is a heartbeat: the delivery stays hidden until now+d. The whole time hidden, from
// the receive to the new deadline, is bounded by Config.MaxExtension (*ExtensionLimitError).
// d = 0 makes the message visible at once, keeping the receipt current.
func (c *Cursor) Extend(now time.Time, receipt string, d time.Duration) ([]Event, error) {
	t := tn(now)
	c.promote(t)
	e, err := c.current(receipt)
	if err != nil {
		return nil, err
	}
	if !e.inFlight || e.at <= t {
		return nil, fmt.Errorf("%w: offset %d", ErrNotInFlight, e.off)
	}
	if d < 0 {
		return nil, fmt.Errorf("%w: extension %v", ErrOutOfRange, d)
	}
	deadline := now.Add(d)
	if total := time.Duration(tn(deadline) - e.lastAt); total > c.cfg.MaxExtension {
		return nil, &ExtensionLimitError{Offset: e.off, Requested: total, Max: c.cfg.MaxExtension}
	}
	ev := Extended{Offset: e.off, Deadline: deadline}
	c.mustApply(ev)
	return []Event{ev}, nil
}

// Nack releases the message named by a current receipt: visible again after delay (0 = now),
// remembering reason for the dead-letter record. The receive count is not given back, so
// repeated nacks end in the dead-letter outcome. In a FIFO queue the group stays blocked
// until the message is delivered again and finished. delay is bounded by Config.Retention.
func (c *Cursor) Nack(now time.Time, receipt string, delay time.Duration, reason string) ([]Event, error) {
	c.promote(tn(now))
	e, err := c.current(receipt)
	if err != nil {
		return nil, err
	}
	if delay < 0 || delay > c.cfg.Retention {
		return nil, fmt.Errorf("%w: nack delay %v", ErrOutOfRange, delay)
	}
	ev := Nacked{Offset: e.off, AvailableAt: now.Add(delay), Reason: clipReason(reason)}
	c.mustApply(ev)
	return []Event{ev}, nil
}

// clipReason keeps a reason within MaxReasonLen bytes without splitting a UTF-8 sequence.
func clipReason(s string) string {
	if len(s) <= MaxReasonLen {
		return s
	}
	// Cutting may split a UTF-8 sequence at the end; ToValidUTF8 drops the broken tail.
	return strings.ToValidUTF8(s[:MaxReasonLen], "")
}

// DeadLetter finishes the message a current receipt names as dead-lettered at the broker's
// request, without another delivery: a Kafka share group's reject, or its release of a record
// at the group's delivery limit. As for Receive's dead letters, the broker copies the message
// to the dead-letter queue before it journals the event.
func (c *Cursor) DeadLetter(now time.Time, receipt, reason string) ([]Event, error) {
	c.promote(tn(now))
	e, err := c.current(receipt)
	if err != nil {
		return nil, err
	}
	ev := DeadLettered{Offset: e.off, Count: int(e.count), FirstAt: nt(e.firstAt), LastAt: nt(e.lastAt),
		SentAt: nt(e.sentAt), GroupID: e.group, Reason: clipReason(reason)}
	c.mustApply(ev)
	return []Event{ev}, nil
}
