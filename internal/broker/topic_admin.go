package broker

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Topic limits and defaults.
const (
	DefaultTopicRetention = 7 * 24 * time.Hour
	// DefaultTopicMaxMessageBytes is Kafka's message.max.bytes: the largest
	// record batch a producer may send.
	DefaultTopicMaxMessageBytes = 1<<20 + 12
	MaxTopicMessageBytes        = 16 << 20
	MaxPartitions               = 10000
	CleanupDelete               = "delete"
	CleanupCompact              = "compact"
	CleanupCompactDelete        = "compact,delete"
	// DefaultDeleteRetention is Kafka's delete.retention.ms default.
	DefaultDeleteRetention = 24 * time.Hour
	// DefaultMinCleanableDirtyRatio is Kafka's min.cleanable.dirty.ratio.
	DefaultMinCleanableDirtyRatio = 0.5
	// MinTopicSegmentBytes is the smallest segment.bytes a topic may set:
	// Kafka's floor (14 bytes, one legacy record) would make a file per
	// batch; sluice's is --segment-bytes' own, 4 KiB.
	MinTopicSegmentBytes = 4 << 10
	// MaxTopicSegmentBytes: a segment's index holds 32-bit positions.
	MaxTopicSegmentBytes = math.MaxInt32
)

// Kafka's rule for topic names.
var topicNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// normalize fills defaults for zero values.
func (s *TopicSettings) normalize() {
	if s.Partitions == 0 {
		s.Partitions = 1
	}
	if s.Retention == 0 {
		s.Retention = DefaultTopicRetention
	}
	if s.MaxMessageBytes == 0 {
		s.MaxMessageBytes = DefaultTopicMaxMessageBytes
	}
	s.CleanupPolicy = canonicalPolicy(s.CleanupPolicy)
}

// canonicalPolicy spells a cleanup policy list one way ("delete,compact"
// and " compact, delete" are "compact,delete"); "" is the default, delete.
// What it does not know it leaves for validate to refuse.
func canonicalPolicy(p string) string {
	var compact, del bool
	for _, v := range strings.Split(p, ",") {
		switch strings.TrimSpace(v) {
		case CleanupCompact:
			compact = true
		case CleanupDelete:
			del = true
		default:
			if p == "" {
				return CleanupDelete
			}
			return p
		}
	}
	switch {
	case compact && del:
		return CleanupCompactDelete
	case compact:
		return CleanupCompact
	}
	return CleanupDelete
}

// Compacted reports whether the topic's cleaner keeps the latest record
// per key (cleanup policy compact or compact,delete).
func (s TopicSettings) Compacted() bool {
	return s.CleanupPolicy == CleanupCompact || s.CleanupPolicy == CleanupCompactDelete
}

// Deletes reports whether retention deletes old segments (cleanup policy
// delete or compact,delete).
func (s TopicSettings) Deletes() bool {
	return s.CleanupPolicy == CleanupDelete || s.CleanupPolicy == CleanupCompactDelete
}

// ReservedTopicPrefix starts the names of Kafka's internal topics
// (__consumer_offsets, __transaction_state): a user may not create one, so
// a client or tool that treats such names as internal is never confused by
// an ordinary topic.
const ReservedTopicPrefix = "__"

func (s *TopicSettings) validate() error {
	switch {
	case !topicNameRE.MatchString(s.Name) || s.Name == "." || s.Name == "..":
		return invalid("name", "%q: want 1-249 letters, digits, '.', '_' or '-'", s.Name)
	case strings.HasPrefix(s.Name, ReservedTopicPrefix):
		return invalid("name", "%q: names starting with %q are reserved for the broker's internal topics (such as __consumer_offsets)", s.Name, ReservedTopicPrefix)
	case s.Partitions < 1 || s.Partitions > MaxPartitions:
		return invalid("partitions", "%d: want 1 to %d", s.Partitions, MaxPartitions)
	case s.MaxMessageBytes < 1024 || s.MaxMessageBytes > MaxTopicMessageBytes:
		return invalid("max_message_bytes", "%d: want 1024 to %d", s.MaxMessageBytes, MaxTopicMessageBytes)
	case s.CleanupPolicy != CleanupDelete && !s.Compacted():
		return invalid("cleanup_policy", "%q: want %q, %q or %q", s.CleanupPolicy, CleanupDelete, CleanupCompact, CleanupCompactDelete)
	case s.MinCompactionLag < 0:
		return invalid("min_compaction_lag", "%v: want 0 or more", s.MinCompactionLag)
	case s.MaxCompactionLag < 0:
		return invalid("max_compaction_lag", "%v: want 0 (none) or more", s.MaxCompactionLag)
	case s.MaxCompactionLag > 0 && s.MinCompactionLag > s.MaxCompactionLag:
		return invalid("max_compaction_lag", "%v is below min_compaction_lag %v", s.MaxCompactionLag, s.MinCompactionLag)
	case s.MinCleanableDirtyRatio > 1 || math.IsNaN(s.MinCleanableDirtyRatio):
		return invalid("min_cleanable_dirty_ratio", "%v: want 0 to 1", s.MinCleanableDirtyRatio)
	case s.SegmentBytes != 0 && (s.SegmentBytes < MinTopicSegmentBytes || s.SegmentBytes > MaxTopicSegmentBytes):
		return invalid("segment_bytes", "%d: want %d to %d (0: the broker's --segment-bytes)", s.SegmentBytes, MinTopicSegmentBytes, MaxTopicSegmentBytes)
	}
	return nil
}

// CreateTopic creates a topic. Zero settings take the defaults: 1
// partition, 7 days of retention (negative: forever), no size limit,
// Kafka's 1 MiB + 12 batch limit, cleanup policy "delete". Creating a topic
// that exists fails with ErrTopicExists, as in Kafka.
func (b *Broker) CreateTopic(s TopicSettings) (TopicSettings, error) {
	s.normalize()
	if err := s.validate(); err != nil {
		return TopicSettings{}, err
	}
	if b.cluster != nil {
		return b.cluster.createTopic(s)
	}
	return b.createTopicLocal(s)
}

// createTopicLocal creates a topic in this node's directory: the whole of CreateTopic on a
// single node, the reconciler's step in a cluster (where s comes from the catalog, with its
// creation time).
func (b *Broker) createTopicLocal(s TopicSettings) (TopicSettings, error) {
	st := b.streams
	st.admin.Lock()
	defer st.admin.Unlock()
	if _, err := st.topic(s.Name); err == nil {
		return TopicSettings{}, fmt.Errorf("%w: %s", ErrTopicExists, s.Name)
	} else if err == ErrClosed {
		return TopicSettings{}, err
	}
	if err := b.disk.Admit(); err != nil {
		return TopicSettings{}, err
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = b.now()
	}
	id, err := b.cat.allocID()
	if err != nil {
		return TopicSettings{}, b.disk.Note(err)
	}
	s.ID = id
	t, err := createEntity(b, topicDir(b.opts.Dir, s), s, func() (*topicRT, error) { return openTopic(st, s) })
	if err != nil {
		return TopicSettings{}, err
	}
	st.mu.Lock()
	st.topics[s.Name] = t
	st.mu.Unlock()
	st.groups.setPartitions(s.Name, s.Partitions)
	return s, nil
}

// DeleteTopic deletes a topic, its partitions and its subscriptions, and
// every group's committed offsets for it, so a new topic of the same name
// never starts consumers at stale positions.
func (b *Broker) DeleteTopic(name string) error {
	if b.cluster != nil {
		return b.cluster.deleteTopic(name)
	}
	return b.deleteTopicLocal(name)
}

func (b *Broker) deleteTopicLocal(name string) error {
	st := b.streams
	st.admin.Lock()
	defer st.admin.Unlock()
	t, err := st.topic(name)
	if err != nil {
		return err
	}
	// Without its settings the whole directory (subscriptions included)
	// is garbage: removed below, or at the next Open after a crash.
	if err := b.cat.drop(t.dir); err != nil {
		return err
	}
	st.mu.Lock()
	delete(st.topics, name)
	st.mu.Unlock()
	st.groups.setPartitions(name, 0)
	if err := t.close(); err != nil {
		b.log.Warn("closing deleted topic", "topic", name, "err", err)
	}
	// The catalog no longer names the directory, and ids are never reused,
	// so a crash here leaves only an orphan directory.
	return vfs.RemoveAll(b.opts.FS, t.dir)
}

// ListTopics returns the settings of every topic whose name starts with
// prefix, sorted by name.
func (b *Broker) ListTopics(prefix string) []TopicSettings {
	var out []TopicSettings
	for _, t := range b.streams.topicList() {
		if strings.HasPrefix(t.name, prefix) {
			s, _ := t.snapshot()
			out = append(out, s)
		}
	}
	return out
}

// PartitionInfo describes one partition of a topic.
type PartitionInfo struct {
	Partition      int32
	LogStartOffset int64
	HighWatermark  int64
	SizeBytes      int64 // bytes of data in its segments
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Settings      TopicSettings
	Partitions    []PartitionInfo
	Subscriptions []string // names, sorted
}

// DescribeTopic returns a topic's settings, partitions and subscriptions.
func (b *Broker) DescribeTopic(name string) (TopicInfo, error) {
	t, err := b.streams.topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	s, parts := t.snapshot()
	info := TopicInfo{Settings: s}
	for _, p := range parts {
		size := p.sizeBytes()
		st := b.offsetsOf(p) // cluster_leaders.go: the leader's, on a node without a copy
		info.Partitions = append(info.Partitions, PartitionInfo{
			Partition: p.index, LogStartOffset: st.LogStartOffset,
			HighWatermark: st.HighWatermark, SizeBytes: size,
		})
	}
	t.mu.RLock()
	for n := range t.subs {
		info.Subscriptions = append(info.Subscriptions, n)
	}
	t.mu.RUnlock()
	sort.Strings(info.Subscriptions)
	return info, nil
}

// PartitionCount returns how many partitions a topic has.
func (b *Broker) PartitionCount(name string) (int32, error) {
	t, err := b.streams.topic(name)
	if err != nil {
		return 0, err
	}
	_, parts := t.snapshot()
	return int32(len(parts)), nil
}

// AddPartitionsWarning is what AddPartitions says about keyed records.
const AddPartitionsWarning = "keys now map to different partitions: records of a key produced before " +
	"the change stay where they are, so per-key order does not hold across it"

// AddPartitions raises a topic's partition count to total (it can never
// shrink). It returns a warning that keys remap: the partitioner hashes a key
// modulo the count. Groups consuming the topic rebalance.
func (b *Broker) AddPartitions(name string, total int32) (string, error) {
	if b.cluster != nil {
		return b.cluster.addPartitions(name, total)
	}
	return b.addPartitionsLocal(name, total)
}

func (b *Broker) addPartitionsLocal(name string, total int32) (string, error) {
	st := b.streams
	st.admin.Lock()
	defer st.admin.Unlock()
	t, err := st.topic(name)
	if err != nil {
		return "", err
	}
	s, parts := t.snapshot()
	if total <= int32(len(parts)) || total > MaxPartitions {
		return "", invalid("partitions", "%d: want more than the current %d and at most %d", total, len(parts), MaxPartitions)
	}
	if err := b.disk.Admit(); err != nil {
		return "", err
	}
	var added []*partitionRT
	// undo closes and removes the new partitions: the catalog never named them.
	undo := func(err error) (string, error) {
		for _, p := range added {
			p.log.Close()
		}
		for i := int32(len(parts)); i < total; i++ {
			if rerr := vfs.RemoveAll(b.opts.FS, filepath.Join(t.dir, strconv.Itoa(int(i)))); rerr != nil {
				b.log.Warn("removing what a failed AddPartitions left", "topic", name, "err", rerr)
			}
		}
		return "", b.disk.Note(err)
	}
	for i := int32(len(parts)); i < total; i++ {
		p, err := t.openPartition(i)
		if err != nil {
			return undo(err)
		}
		added = append(added, p)
	}
	s.Partitions = total
	if err := b.cat.put(t.dir, s); err != nil {
		return undo(err)
	}
	t.mu.Lock()
	t.settings = s
	t.parts = append(t.parts, added...)
	for _, sub := range t.subs {
		sub.addPartitions(added)
	}
	t.mu.Unlock()
	st.groups.setPartitions(name, total)
	return AddPartitionsWarning, nil
}
