package broker

import (
	"maps"
	"regexp"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// QueueSettings are a queue's attributes. Zero values mean "the default"
// when creating a queue; Normalize fills them in and Validate checks ranges.
type QueueSettings struct {
	Name       string    `json:"name"`
	ID         uint64    `json:"id"` // names the queue's directory; never reused
	CreatedAt  time.Time `json:"created_at"`
	ModifiedAt time.Time `json:"modified_at"`

	VisibilityTimeout time.Duration `json:"visibility_timeout"` // default 30 s, at most 12 h
	Retention         time.Duration `json:"retention"`          // default 4 days, 60 s to 365 days
	DefaultDelay      time.Duration `json:"default_delay"`      // default 0, at most the retention
	ReceiveWait       time.Duration `json:"receive_wait"`       // default long-poll wait, at most 20 s
	MaxMessageBytes   int           `json:"max_message_bytes"`  // default and maximum 1 MiB
	MaxExtension      time.Duration `json:"max_extension"`      // bound on a delivery's total visibility, default 12 h

	// MaxReceives > 0 with a DeadLetterQueue moves a message that would be
	// received more often than that to the dead-letter queue.
	MaxReceives     int    `json:"max_receives,omitempty"`
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`

	FIFO              bool          `json:"fifo,omitempty"`
	ContentBasedDedup bool          `json:"content_based_dedup,omitempty"`
	DedupWindow       time.Duration `json:"dedup_window"` // default 5 minutes
	// DedupScope says where a deduplication id must be unique:
	// DedupScopeQueue (the default) or DedupScopeGroup, where the same id
	// in two message groups is two messages (SQS's DeduplicationScope,
	// high-throughput FIFO).
	DedupScope string `json:"dedup_scope,omitempty"`

	// Tags and Extra are stored for front-ends (SQS tags, policies,
	// permissions) and never interpreted by the broker.
	Tags  map[string]string `json:"tags,omitempty"`
	Extra map[string]string `json:"extra,omitempty"`
}

// Limits and defaults of queue settings.
const (
	DefaultVisibility      = 30 * time.Second
	MaxVisibility          = 12 * time.Hour
	DefaultRetention       = 4 * 24 * time.Hour
	MinRetention           = 60 * time.Second
	MaxRetention           = 365 * 24 * time.Hour
	MaxReceiveWait         = 20 * time.Second
	DefaultMaxMessageBytes = 1 << 20
	DefaultMaxExtension    = 12 * time.Hour
	DefaultDedupWindow     = 5 * time.Minute
	MaxNameLength          = 80
)

// Deduplication scopes of FIFO queues (QueueSettings.DedupScope).
const (
	DedupScopeQueue = "queue"
	DedupScopeGroup = "messageGroup"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}(\.fifo)?$`)

func (s QueueSettings) clone() QueueSettings {
	s.Tags = maps.Clone(s.Tags)
	s.Extra = maps.Clone(s.Extra)
	return s
}

// Normalize fills defaults for zero values.
func (s *QueueSettings) Normalize() {
	if s.VisibilityTimeout == 0 {
		s.VisibilityTimeout = DefaultVisibility
	}
	if s.Retention == 0 {
		s.Retention = DefaultRetention
	}
	if s.MaxMessageBytes == 0 {
		s.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if s.MaxExtension == 0 {
		// A delivery cannot stay hidden longer than its message is kept.
		s.MaxExtension = min(DefaultMaxExtension, s.Retention)
	}
	if s.DedupWindow == 0 {
		s.DedupWindow = DefaultDedupWindow
	}
}

// Validate checks every setting's range. It expects Normalize to have run.
func (s *QueueSettings) Validate() error {
	switch {
	case !nameRE.MatchString(s.Name):
		return invalid("name", "%q: want 1-80 letters, digits, '-' or '_' (FIFO queues end in .fifo)", s.Name)
	case s.FIFO != hasFIFOSuffix(s.Name):
		return invalid("name", "a FIFO queue's name ends in .fifo, and only a FIFO queue's does")
	case s.VisibilityTimeout < 0 || s.VisibilityTimeout > MaxVisibility:
		return invalid("visibility_timeout", "%v: want 0 to %v", s.VisibilityTimeout, MaxVisibility)
	case s.Retention < MinRetention || s.Retention > MaxRetention:
		return invalid("retention", "%v: want %v to %v", s.Retention, MinRetention, MaxRetention)
	case s.DefaultDelay < 0 || s.DefaultDelay > s.Retention:
		return invalid("default_delay", "%v: want 0 to the retention period", s.DefaultDelay)
	case s.ReceiveWait < 0 || s.ReceiveWait > MaxReceiveWait:
		return invalid("receive_wait", "%v: want 0 to %v", s.ReceiveWait, MaxReceiveWait)
	case s.MaxMessageBytes < 1 || s.MaxMessageBytes > DefaultMaxMessageBytes:
		return invalid("max_message_bytes", "%d: want 1 to %d", s.MaxMessageBytes, DefaultMaxMessageBytes)
	case s.MaxExtension < s.VisibilityTimeout:
		return invalid("max_extension", "%v: must be at least the visibility timeout", s.MaxExtension)
	case s.MaxExtension > s.Retention:
		return invalid("max_extension", "%v: must not exceed the retention period %v", s.MaxExtension, s.Retention)
	case s.MaxReceives < 0 || s.MaxReceives > queue.MaxReceivesLimit:
		// The cursor refuses more than its limit too, but as a config
		// error the API can only call internal: refuse it here, by field.
		return invalid("max_receives", "%d: want 0 to %d", s.MaxReceives, queue.MaxReceivesLimit)
	case (s.MaxReceives > 0) != (s.DeadLetterQueue != ""):
		return invalid("max_receives", "a receive limit and a dead-letter queue go together")
	case s.DeadLetterQueue == s.Name:
		return invalid("dead_letter_queue", "a queue cannot be its own dead-letter queue")
	case s.ContentBasedDedup && !s.FIFO:
		return invalid("content_based_dedup", "only FIFO queues deduplicate by content")
	case s.DedupWindow < 0 || s.DedupWindow > s.Retention:
		return invalid("dedup_window", "%v: want 0 to the retention period", s.DedupWindow)
	case s.DedupScope != "" && s.DedupScope != DedupScopeQueue && s.DedupScope != DedupScopeGroup:
		return invalid("dedup_scope", "%q: want %q or %q", s.DedupScope, DedupScopeQueue, DedupScopeGroup)
	case s.DedupScope == DedupScopeGroup && !s.FIFO:
		return invalid("dedup_scope", "only FIFO queues deduplicate")
	}
	return nil
}

func hasFIFOSuffix(name string) bool {
	return len(name) > 5 && name[len(name)-5:] == ".fifo"
}

// TopicSettings are a stream topic's attributes.
type TopicSettings struct {
	Name            string        `json:"name"`
	ID              uint64        `json:"id"`
	CreatedAt       time.Time     `json:"created_at"`
	Partitions      int32         `json:"partitions"`
	Retention       time.Duration `json:"retention"`       // default 7 days; negative: keep forever
	RetentionBytes  int64         `json:"retention_bytes"` // per partition; 0 or negative: unlimited
	MaxMessageBytes int           `json:"max_message_bytes"`
	CleanupPolicy   string        `json:"cleanup_policy"` // "delete", "compact" or "compact,delete"

	// Compaction (cleanup policy "compact" or "compact,delete"; topic_compaction.go).
	// Zero values are the defaults, as Kafka's: tombstones kept 1 day after their
	// segment is cleaned (negative: 0, dropped at the next clean), no minimum lag, no
	// maximum lag, a dirty ratio of 0.5 (negative: 0, clean whenever anything is dirty).
	DeleteRetention        time.Duration `json:"delete_retention,omitempty"`
	MinCompactionLag       time.Duration `json:"min_compaction_lag,omitempty"`
	MaxCompactionLag       time.Duration `json:"max_compaction_lag,omitempty"`
	MinCleanableDirtyRatio float64       `json:"min_cleanable_dirty_ratio,omitempty"`

	// SegmentBytes is the size at which the topic's partition logs roll a
	// segment (Kafka's segment.bytes); 0 follows the broker's --segment-bytes.
	// A change applies at each log's next roll (topic_config.go).
	SegmentBytes int64 `json:"segment_bytes,omitempty"`

	// In a cluster (zero for a single node): the topic's cluster-wide id (its Kafka topic
	// id), the catalog index of its last change this node applied, and its replication
	// factor. They come from the catalog, never from a client.
	UUID         [16]byte `json:"uuid,omitzero"`
	CatalogIndex uint64   `json:"catalog_index,omitempty"`
	Replication  int      `json:"replication,omitempty"`
}
