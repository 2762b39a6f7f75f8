package storage

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// SyncMode says when appended data is made durable with fdatasync.
type SyncMode int

// Sync modes. See docs/storage.md for what each loses on a crash.
const (
	// SyncAlways (default): Append returns only after an fdatasync that covers
	// its batches; concurrent appends share one fdatasync (group commit).
	SyncAlways SyncMode = iota
	// SyncInterval: Append returns once the batches are written to the OS;
	// a background goroutine syncs every Interval.
	SyncInterval
	// SyncNever: the OS decides; the log syncs only when a segment rolls or
	// on Close.
	SyncNever
)

// SyncPolicy is the durability policy of a log.
type SyncPolicy struct {
	Mode     SyncMode
	Interval time.Duration // SyncInterval only
}

// ParseSyncPolicy reads "always", "never", a duration such as "250ms", or
// "interval=250ms".
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "", "always":
		return SyncPolicy{Mode: SyncAlways}, nil
	case "never":
		return SyncPolicy{Mode: SyncNever}, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "interval="))
	if err != nil || d <= 0 {
		return SyncPolicy{}, fmt.Errorf("storage: sync policy %q: want always, never or a positive duration", s)
	}
	return SyncPolicy{Mode: SyncInterval, Interval: d}, nil
}

func (p SyncPolicy) String() string {
	switch p.Mode {
	case SyncAlways:
		return "always"
	case SyncNever:
		return "never"
	default:
		return "interval=" + p.Interval.String()
	}
}

// Observer is told how long each fdatasync took and how many appends each
// group commit made durable. The metrics package satisfies it; storage
// declares it so that it depends on no metrics library.
type Observer interface {
	ObserveFsync(d time.Duration)
	ObserveCommitBatch(appends int)
}

// CorruptionObserver is implemented by an Observer that also wants to hear
// of every damaged batch a log quarantines
// (sluice_storage_corrupt_batches_total). FileCache.Stats counts them too.
type CorruptionObserver interface {
	ObserveCorruptBatch()
}

// Options configure a Log. Zero values take the defaults listed.
type Options struct {
	FS  vfs.FS // default vfs.Default
	Dir string // required: one directory per partition

	SegmentBytes   int64         // roll when a segment would pass this size; default 1 GiB, max 2 GiB-1
	SegmentAge     time.Duration // roll a non-empty segment this old; default 7 days
	RetentionTime  time.Duration // delete sealed segments whose newest timestamp is older; 0: keep
	RetentionBytes int64         // delete oldest sealed segments while the log is larger; 0: no limit

	// PreallocateBytes, when positive, makes the active segment's file
	// write this many bytes of zeros ahead of its appends, so an fdatasync
	// after an append flushes data only, with no file-size change for the
	// file system to journal (see vfs.Preallocator): it about doubles the
	// syncs per second of small appends on ext4. It costs writing the zeros
	// once. 0: off. Ignored by file systems without preallocation (MemFS).
	PreallocateBytes int64

	MaxBatchBytes      int // largest accepted batch; default 1 MiB + 12 (Kafka's message.max.bytes)
	IndexIntervalBytes int // bytes between sparse index entries; default 4096

	// Files is the file-descriptor cache (and background scrub) the log
	// shares with others; default DefaultFileCache(), one per process.
	Files *FileCache

	Sync SyncPolicy
	// SyncAheadBytes, when positive and Sync is SyncNever, starts a background
	// fdatasync whenever this many bytes were written since the last one was
	// started; appends never wait for it. A log synced only at checkpoints
	// (a cluster replica's) otherwise piles up the whole interval's dirty
	// pages for the checkpoint's own Sync, which then stalls its caller for
	// the length of that writeback. 0: off.
	SyncAheadBytes int64
	Now            func() time.Time // default time.Now; tests inject a clock
	Logger         *slog.Logger     // default slog.Default()
	// Observer, if set, hears of every fdatasync and group commit (metrics).
	Observer Observer
}

func (o *Options) setDefaults() error {
	if o.Dir == "" {
		return fmt.Errorf("storage: Options.Dir is required")
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 1 << 30
	}
	if o.SegmentBytes > math.MaxInt32 {
		return fmt.Errorf("storage: SegmentBytes %d over the 2 GiB index limit", o.SegmentBytes)
	}
	if o.SegmentAge <= 0 {
		o.SegmentAge = 7 * 24 * time.Hour
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 1<<20 + 12
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = 4096
	}
	if o.Sync.Mode == SyncInterval && o.Sync.Interval <= 0 {
		return fmt.Errorf("storage: SyncInterval needs a positive Interval")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Files == nil {
		o.Files = DefaultFileCache()
	}
	return nil
}
