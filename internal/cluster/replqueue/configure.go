package replqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// Changing a queue's times. A queue's cursor applies its retention and extension limit at
// apply time (a message past the retention expires when a command's clock passes it), so a
// change must take effect at one place in the log on every replica: a Configure entry. The
// cursor is rebuilt from its own snapshot with the new times there, as a single node's
// queue is on UpdateQueue. The times in force are carried in the machine's snapshot (version
// 3); a replica that replays from the log's start begins with the times the queue was
// created with (NewMachine's), so the creator must keep those for it (the broker keeps them
// in the catalog beside the queue's current settings).

// Times are the queue's settings a Configure changes: its FIFO-ness never changes, and a
// replicated queue's receive limit lives in each limited Receive.
type Times struct {
	Visibility   time.Duration
	MaxExtension time.Duration
	Retention    time.Duration
}

func timesOf(c queue.Config) Times {
	return Times{Visibility: c.Visibility, MaxExtension: c.MaxExtension, Retention: c.Retention}
}

func (t Times) on(c queue.Config) queue.Config {
	c.Visibility, c.MaxExtension, c.Retention = t.Visibility, t.MaxExtension, t.Retention
	return c
}

// configure is OpConfigure applied: the cursor rebuilt with the new times. Times a cursor
// refuses are the proposer's error and change nothing.
func (m *Machine) configure(now time.Time, t Times) error {
	cfg := t.on(m.cfg)
	cur, err := queue.Restore(cfg, m.cur.Snapshot())
	if err != nil {
		return fmt.Errorf("%w: %w", queue.ErrOutOfRange, err)
	}
	m.cur, m.cfg = cur, cur.Config()
	m.fill(now)
	return nil
}

// Config is the queue's configuration as of the last applied entry.
func (m *Machine) Config() queue.Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg
}

// Configure changes the queue's times from this entry on, on every replica. Errors as
// Send's; times the cursor refuses are queue.ErrOutOfRange and change nothing.
func (q *Queue) Configure(ctx context.Context, t Times) error {
	if err := t.on(queue.Config{}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", queue.ErrOutOfRange, err)
	}
	_, err := q.do(ctx, Command{Op: OpConfigure, Times: t})
	return err
}
