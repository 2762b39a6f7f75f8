package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// ShareConfig is a share group's configuration (KIP-932 group configs).
// Kafka's names, set through IncrementalAlterConfigs on the GROUP
// resource, are the keys of ShareConfigKeys; sluice adds one of its own,
// sluice.share.dead.letter.queue.
type ShareConfig struct {
	// LockDuration is how long a record stays acquired by a member before
	// it is available again (share.record.lock.duration.ms).
	LockDuration time.Duration `json:"lock_duration"`
	// DeliveryLimit is how many deliveries a record gets; a record
	// released or timed out at the limit is archived
	// (share.delivery.count.limit).
	DeliveryLimit int `json:"delivery_limit"`
	// AutoOffsetReset is where a new share-partition starts: "latest" (the
	// default, as Kafka) or "earliest" (share.auto.offset.reset). It is
	// read when the group's subscription of a topic is created.
	AutoOffsetReset   string        `json:"auto_offset_reset"`
	SessionTimeout    time.Duration `json:"session_timeout"`    // share.session.timeout.ms
	HeartbeatInterval time.Duration `json:"heartbeat_interval"` // share.heartbeat.interval.ms
	// DeadLetterQueue, beyond Kafka, names a sluice queue that receives a
	// copy of every record archived at the delivery limit or rejected,
	// instead of archiving it silently (sluice.share.dead.letter.queue).
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`
}

// DefaultShareConfig is Kafka 4.2's defaults.
func DefaultShareConfig() ShareConfig {
	return ShareConfig{LockDuration: 30 * time.Second, DeliveryLimit: 5, AutoOffsetReset: "latest",
		SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second}
}

// The group config names and the ranges Kafka 4.2 accepts.
const (
	ShareLockDurationKey    = "share.record.lock.duration.ms"
	ShareDeliveryLimitKey   = "share.delivery.count.limit"
	ShareAutoOffsetResetKey = "share.auto.offset.reset"
	ShareSessionTimeoutKey  = "share.session.timeout.ms"
	ShareHeartbeatKey       = "share.heartbeat.interval.ms"
	ShareDeadLetterKey      = "sluice.share.dead.letter.queue"
	// ShareIsolationLevelKey is always read_committed: a share group reads
	// through a subscription, which waits at the last stable offset and
	// never delivers an aborted record. Kafka's default is
	// read_uncommitted; sluice refuses it rather than accept a setting it
	// would not honour.
	ShareIsolationLevelKey = "share.isolation.level"
)

// ShareConfigKeys lists the group configs served, sorted.
func ShareConfigKeys() []string {
	keys := []string{ShareLockDurationKey, ShareDeliveryLimitKey, ShareAutoOffsetResetKey,
		ShareSessionTimeoutKey, ShareHeartbeatKey, ShareDeadLetterKey, ShareIsolationLevelKey}
	sort.Strings(keys)
	return keys
}

// Values renders the config as Kafka's strings, by key.
func (c ShareConfig) Values() map[string]string {
	return map[string]string{
		ShareLockDurationKey:    strconv.FormatInt(c.LockDuration.Milliseconds(), 10),
		ShareDeliveryLimitKey:   strconv.Itoa(c.DeliveryLimit),
		ShareAutoOffsetResetKey: c.AutoOffsetReset,
		ShareSessionTimeoutKey:  strconv.FormatInt(c.SessionTimeout.Milliseconds(), 10),
		ShareHeartbeatKey:       strconv.FormatInt(c.HeartbeatInterval.Milliseconds(), 10),
		ShareDeadLetterKey:      c.DeadLetterQueue,
		ShareIsolationLevelKey:  "read_committed",
	}
}

// Set changes one config from its string (nil: back to the default). An
// unknown key or a value out of Kafka's range is an *InvalidArgumentError
// and changes nothing.
func (c *ShareConfig) Set(key string, value *string) error {
	def := DefaultShareConfig()
	ms := func(lo, hi int64, dst *time.Duration, d time.Duration) error {
		if value == nil {
			*dst = d
			return nil
		}
		n, err := strconv.ParseInt(*value, 10, 64)
		if err != nil || n < lo || n > hi {
			return invalid(key, "%q: want %d to %d", *value, lo, hi)
		}
		*dst = time.Duration(n) * time.Millisecond
		return nil
	}
	switch key {
	case ShareLockDurationKey:
		return ms(1000, 3_600_000, &c.LockDuration, def.LockDuration)
	case ShareSessionTimeoutKey:
		return ms(45_000, 60_000, &c.SessionTimeout, def.SessionTimeout)
	case ShareHeartbeatKey:
		return ms(5_000, 15_000, &c.HeartbeatInterval, def.HeartbeatInterval)
	case ShareDeliveryLimitKey:
		if value == nil {
			c.DeliveryLimit = def.DeliveryLimit
			return nil
		}
		n, err := strconv.Atoi(*value)
		if err != nil || n < 2 || n > 10 {
			return invalid(key, "%q: want 2 to 10", *value)
		}
		c.DeliveryLimit = n
	case ShareAutoOffsetResetKey:
		switch {
		case value == nil:
			c.AutoOffsetReset = def.AutoOffsetReset
		case *value == "latest" || *value == "earliest":
			c.AutoOffsetReset = *value
		default:
			return invalid(key, "%q: want latest or earliest", *value)
		}
	case ShareIsolationLevelKey:
		if value != nil && *value != "read_committed" {
			return invalid(key, "%q: sluice's share groups read committed records only (a subscription waits at the last stable offset): want read_committed", *value)
		}
	case ShareDeadLetterKey:
		c.DeadLetterQueue = ""
		if value != nil {
			c.DeadLetterQueue = *value
		}
	default:
		return invalid("config", "%q is not a share group config sluice serves", key)
	}
	return nil
}

const shareConfigFile = "share-groups.json"

// loadShareConfigs reads the group configs written by saveLocked.
func (sg *shareGroups) load() error {
	data, err := vfs.ReadFile(sg.b.opts.FS, sg.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &sg.configs); err != nil {
		return fmt.Errorf("broker: %s: %w", shareConfigFile, err)
	}
	return nil
}

func (sg *shareGroups) path() string { return filepath.Join(sg.b.opts.Dir, shareConfigFile) }

// saveLocked writes every group's config, atomically. Called with mu held.
func (sg *shareGroups) saveLocked(configs map[string]ShareConfig) error {
	data, err := json.Marshal(configs)
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(sg.b.opts.FS, sg.b.opts.Dir, shareConfigFile, data)
}

// ShareGroupConfig returns a group's config (the defaults if none was set). In a cluster
// it is the catalog's (cluster_share_config.go).
func (b *Broker) ShareGroupConfig(group string) ShareConfig {
	if b.cluster != nil {
		cfg, _ := b.cluster.shareConfig(group)
		return cfg
	}
	sg := b.shares()
	sg.mu.Lock()
	defer sg.mu.Unlock()
	return sg.configLocked(group)
}

func (sg *shareGroups) configLocked(group string) ShareConfig {
	if c, ok := sg.configs[group]; ok {
		return c
	}
	return DefaultShareConfig()
}

// AlterShareGroupConfig applies changes (key to value; nil resets the
// default) to a group's config, all or nothing, durably. validateOnly
// checks without storing.
func (b *Broker) AlterShareGroupConfig(group string, changes map[string]*string, validateOnly bool) error {
	if group == "" {
		return ErrInvalidGroupID
	}
	if b.cluster != nil {
		return b.cluster.alterShareGroupConfig(group, changes, validateOnly) // cluster_share_config.go
	}
	sg := b.shares()
	sg.mu.Lock()
	defer sg.mu.Unlock()
	c := sg.configLocked(group)
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := c.Set(k, changes[k]); err != nil {
			return err
		}
	}
	if c.DeadLetterQueue != "" {
		if _, err := b.queue(c.DeadLetterQueue); err != nil {
			return invalid(ShareDeadLetterKey, "%v", err)
		}
	}
	if validateOnly {
		return nil
	}
	next := make(map[string]ShareConfig, len(sg.configs)+1)
	for k, v := range sg.configs {
		next[k] = v
	}
	next[group] = c
	if err := sg.saveLocked(next); err != nil {
		return err
	}
	sg.configs = next
	return nil
}
