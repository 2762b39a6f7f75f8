package replpart

import (
	"context"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

// SetClock sets the clock this node stamps cursor entries with (time.Now by default).
func (p *Partition) SetClock(clock func() time.Time) { p.clock = clock }

// CreateCursor gives subscription sub a cursor in this partition, at the log's end as the
// entry applies (or its start with cfg.FromEarliest). ErrCursorExists if it has one.
func (p *Partition) CreateCursor(ctx context.Context, sub uint64, cfg CursorConfig) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: CursorCreate, Config: cfg})
	return err
}

// DeleteCursor removes subscription sub's cursor from this partition.
func (p *Partition) DeleteCursor(ctx context.Context, sub uint64) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: CursorDelete})
	return err
}

// Receive hands out up to max records of subscription sub, hidden for visibility (0: the
// cursor's). The receipts are the cursor's, valid on every replica once this returns.
func (p *Partition) Receive(ctx context.Context, sub uint64, max int, visibility time.Duration) ([]queue.Delivery, error) {
	return p.cursor(ctx, CursorEntry{Sub: sub, Kind: replcursor.Receive, Op: replcursor.Op{Max: max, Timeout: visibility}})
}

// Ack finishes the delivery a receipt names (queue.ErrReceiptStale if it is not current).
func (p *Partition) Ack(ctx context.Context, sub uint64, receipt string) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: replcursor.Ack, Op: replcursor.Op{Receipt: receipt}})
	return err
}

// Nack makes a delivery visible again after delay.
func (p *Partition) Nack(ctx context.Context, sub uint64, receipt string, delay time.Duration) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: replcursor.Nack, Op: replcursor.Op{Receipt: receipt, Delay: delay}})
	return err
}

// Extend hides a delivery for d from now (0: visible now).
func (p *Partition) Extend(ctx context.Context, sub uint64, receipt string, d time.Duration) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: replcursor.Extend, Op: replcursor.Op{Receipt: receipt, Timeout: d}})
	return err
}

// cursor proposes a cursor entry and waits for its result, with Append's errors.
func (p *Partition) cursor(ctx context.Context, e CursorEntry) ([]queue.Delivery, error) {
	c, err := p.startCursor(e)
	if err != nil {
		return nil, err
	}
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	r, err := p.finishCursor(c)
	if err != nil {
		return nil, err
	}
	return r.Deliveries, r.Err
}

// startCursor stamps e with this node's clock (never before the group's applied time) and
// proposes it.
func (p *Partition) startCursor(e CursorEntry) (*call, error) {
	if err := checkCursorEntry(&e); err != nil {
		return nil, err
	}
	if err := p.admitted(CursorKind(e.Kind)); err != nil {
		return nil, err
	}
	clock := p.clock
	if clock == nil {
		clock = time.Now
	}
	e.Origin, e.Request = uint64(p.host.Node()), p.seq.Add(1)
	e.Now = replcursor.Stamp(clock, p.sm.Now())
	pr, err := p.host.ProposeAsync(p.group, e.Encode(nil))
	if err != nil {
		return nil, mapErr(err)
	}
	return &call{p: pr, req: e.Request}, nil
}

func (p *Partition) finishCursor(c *call) (CursorResult, error) { return take(c, &p.sm.cursorResults) }
