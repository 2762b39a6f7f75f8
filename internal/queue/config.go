package queue

import (
	"errors"
	"fmt"
	"time"
)

// Defaults applied to zero fields of Config.
const (
	DefaultVisibility   = 30 * time.Second
	DefaultMaxExtension = 12 * time.Hour
	DefaultRetention    = 4 * 24 * time.Hour
	DefaultLookahead    = 1024
	DefaultDedupWindow  = 5 * time.Minute

	// MaxRetention is the longest retention a queue may have (SQS allows 14 days; we allow more).
	MaxRetention = 365 * 24 * time.Hour
	// MaxReceivesLimit bounds Config.MaxReceives.
	MaxReceivesLimit = 1000
	// MaxLookahead bounds Config.Lookahead, and so the memory spent on buffered metadata.
	MaxLookahead = 1 << 20
	// MaxReasonLen bounds a nack reason kept in memory and in the journal; longer ones are cut.
	MaxReasonLen = 1024
)

// Config is a queue's cursor settings. Zero fields take the defaults above.
type Config struct {
	// Visibility is how long a received message stays hidden unless the receive overrides it.
	Visibility time.Duration
	// MaxExtension bounds the total time a delivery may stay hidden, counted from the receive,
	// across any number of Extend calls. It also bounds a receive's visibility override.
	// Default 12 h, or Retention if that is shorter.
	MaxExtension time.Duration
	// MaxReceives is how many deliveries a message gets; the receive after the last failed one
	// dead-letters it instead. 0 means no limit (never dead-letter).
	MaxReceives int
	// FIFO delivers each group's messages strictly in offset order, one at a time.
	FIFO bool
	// Lookahead is how many never-delivered, not-delayed messages the cursor buffers. In a FIFO
	// queue it is also the head-of-line limit: messages of blocked groups occupy the window.
	Lookahead int
	// Retention drops messages sent longer ago than this when the cursor next sees them.
	// It also bounds a nack delay.
	Retention time.Duration
}

// ErrConfig is matched (errors.Is) by every ConfigError.
var ErrConfig = errors.New("queue: invalid config")

// ConfigError says which attribute is out of range.
type ConfigError struct {
	Field  string
	Value  any
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("queue: invalid %s %v: %s", e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Validate reports the first out-of-range attribute as a *ConfigError, or nil.
func (c Config) Validate() error {
	d := c.withDefaults()
	// Each field on its own first, then how they relate, so the error names the field at fault.
	switch {
	case c.Visibility < 0:
		return &ConfigError{"Visibility", c.Visibility, "must not be negative"}
	case c.MaxExtension < 0 || (c.MaxExtension != 0 && c.MaxExtension < time.Second):
		return &ConfigError{"MaxExtension", c.MaxExtension, "must be at least 1s"}
	case c.MaxReceives < 0 || c.MaxReceives > MaxReceivesLimit:
		return &ConfigError{"MaxReceives", c.MaxReceives, fmt.Sprintf("must be between 0 and %d", MaxReceivesLimit)}
	case c.Lookahead < 0 || c.Lookahead > MaxLookahead:
		return &ConfigError{"Lookahead", c.Lookahead, fmt.Sprintf("must be between 0 and %d", MaxLookahead)}
	case c.Retention < 0 || (c.Retention != 0 && c.Retention < time.Minute) || c.Retention > MaxRetention:
		return &ConfigError{"Retention", c.Retention, "must be between 1m and 365 days"}
	case d.Visibility > d.MaxExtension:
		return &ConfigError{"Visibility", c.Visibility, "must not exceed MaxExtension"}
	case d.MaxExtension > d.Retention:
		return &ConfigError{"MaxExtension", c.MaxExtension, "must not exceed Retention"}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Visibility == 0 {
		c.Visibility = DefaultVisibility
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.MaxExtension == 0 {
		// A short retention lowers the default, rather than making the default invalid.
		c.MaxExtension = min(DefaultMaxExtension, c.Retention)
	}
	if c.Lookahead == 0 {
		c.Lookahead = DefaultLookahead
	}
	return c
}
