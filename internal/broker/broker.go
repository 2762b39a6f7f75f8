// Package broker is sluice's core Go API: it owns queues, topics, consumer
// groups and subscriptions, and wires the pure state machines (internal/queue,
// internal/group) to durable logs (internal/storage).
//
// Every protocol front-end (native API, Kafka, SQS) calls this package and
// nothing below it. Each journaled state machine it runs (a queue's cursor,
// a subscription's cursors, the group coordinator) lives in a machine
// (machine.go): one lock, one journal, one recovery policy for all. The broker never imports a front-end or net/http, and it
// never answers a write before it is durable under the configured sync policy.
//
// On disk, under Options.Dir:
//
//	LOCK                         flock held while a broker has the directory open (vfs.LockDir)
//	format.json                  the on-disk format version; a newer major is refused (format.go)
//	receipt-key.json             the key receipts are authenticated with, and a copy beside it (receipt.go)
//	ids.json                     the next id for a queue, topic or subscription directory (catalog.go)
//	headroom                     space kept for acks and deletes on a full disk (package diskguard)
//	queues/<id>-<name>/settings.json  its settings, checksummed, and a copy beside it (catalog.go)
//	queues/<id>-<name>/log/      the messages: a storage log of Kafka batches
//	queues/<id>-<name>/journal/  cursor events (receives, acks, nacks, …): a storage log
//	queues/<id>-<name>/snapshot  cursor snapshot and the journal offset it covers
//	redrives/<id>.json           redrive tasks' definitions and progress (redrive_store.go)
//	transactions.log             Kafka's transaction coordinator state (package txn; txn.go)
package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/diskguard"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Options configure a Broker. Zero values take the defaults listed.
type Options struct {
	Dir    string             // required
	FS     vfs.FS             // default vfs.Default
	Sync   storage.SyncPolicy // default SyncAlways
	Now    func() time.Time   // default time.Now; tests drive a fake clock
	Logger *slog.Logger       // default slog.Default()

	// SnapshotEvery is how many journal events a queue writes between
	// cursor snapshots; it bounds replay work at start. Default 100,000.
	SnapshotEvery int
	// SegmentBytes is the segment size of message logs; default 128 MiB.
	SegmentBytes int64
	// StorageObserver, if set, hears of every fdatasync and group commit
	// of every log (the server feeds it to /metrics).
	StorageObserver storage.Observer
	// PreallocateBytes is how far ahead of its appends each log's active
	// segment is zero-filled (storage.Options.PreallocateBytes), so that an
	// fdatasync flushes data without a file-size change to journal: it about
	// doubles small synced appends per second on ext4. Default 1 MiB;
	// negative: off.
	PreallocateBytes int64
	// HeadroomBytes is the space kept free in Dir for the writes that
	// free space (acks, deletes) once the disk is full (package diskguard).
	// Default 64 MiB; negative: none.
	HeadroomBytes int64
	// Files bounds the file descriptors of every log of the broker and runs
	// their background scrub (storage.FileCache); its Stats count damaged
	// batches (sluice_storage_corrupt_batches_total). Default: one of
	// storage's default size for this broker.
	Files *storage.FileCache
	// CompactionBufferBytes bounds the memory of one cleaner pass (its
	// offset map, 24 bytes a key: storage.CleanOptions.BufferBytes); default
	// 32 MiB. CompactionBytesPerSec bounds the cleaner's reads plus writes;
	// 0: no limit. CompactionInterval is how often it looks for work;
	// default 15 s.
	CompactionBufferBytes int64
	CompactionBytesPerSec int64
	CompactionInterval    time.Duration
	// Cluster, when set, makes the broker a node of a cluster: topics are the
	// metadata group's and partitions are replicated (cluster.go). nil: a single
	// node, as before.
	Cluster *ClusterOptions
	// ConsumerGroups configures KIP-848 consumer groups (Kafka's
	// group.consumer.* settings); zero fields take Kafka's defaults.
	ConsumerGroups ConsumerGroupConfig
	// TransactionMaxTimeout is Kafka's transaction.max.timeout.ms: a
	// transactional producer asking a longer transaction.timeout.ms is
	// refused (INVALID_TRANSACTION_TIMEOUT). Default 15 minutes.
	TransactionMaxTimeout time.Duration
	// ProducerIDExpiration is Kafka's producer.id.expiration.ms: a partition
	// forgets an idempotent producer that wrote nothing to it for this long
	// (producer.State.IdleSince). Default DefaultProducerIDExpiration;
	// negative: never.
	ProducerIDExpiration time.Duration
}

// DefaultProducerIDExpiration is Options.ProducerIDExpiration's default, Kafka's.
const DefaultProducerIDExpiration = 24 * time.Hour

// DefaultPreallocateBytes is Options.PreallocateBytes's default.
const DefaultPreallocateBytes = 1 << 20

// logOptions are the storage options every log of this broker shares.
func (b *Broker) logOptions(dir string, segmentBytes int64) storage.Options {
	return storage.Options{
		FS: b.opts.FS, Dir: dir, Sync: b.opts.Sync, Now: b.opts.Now, Logger: b.log,
		SegmentBytes: segmentBytes, Observer: b.opts.StorageObserver,
		PreallocateBytes: b.opts.PreallocateBytes, Files: b.opts.Files,
	}
}

// Broker is the core. It is safe for concurrent use.
type Broker struct {
	opts Options
	log  *slog.Logger
	cat  *catalog

	// queueAdmin serializes the operations that add, remove or relink
	// queues (create, delete, update), so their checks (does the name
	// exist, is the dead-letter target there) hold through their disk
	// writes without holding mu: lookups, and so every send and receive,
	// never wait for a create's fsyncs. It is taken before mu, never
	// after. Writers of queues and unavailable hold both; readers either.
	queueAdmin sync.Mutex

	mu     sync.RWMutex // guards queues, unavailable, closing and closed; a queue's own state has its own lock
	queues map[string]*queueRT
	// unavailable are the queues that failed to open at start, with why:
	// listed, refused with ErrQueueUnavailable, removable by DeleteQueue.
	unavailable map[string]unavailableQueue
	closing     bool // Close has begun (redrives stopping); queues still answer
	closed      bool

	streams *streams // topics, producer ids, groups, subscriptions (topic.go)

	cluster *clusterRT // nil for a single node (cluster.go)

	redrive redrives

	lock *vfs.DirLock // the data directory's flock; nil on an in-memory FS
	// receipts authenticates every queue's and subscription's receipts
	// (receipt.go).
	receipts *receiptKey
	disk     *diskguard.Guard // the headroom, and whether writes work

	stopMaint chan struct{}
	maintDone chan struct{}
	cleaner   cleanerRT // the compaction cleaner's totals (topic_compaction.go)

	shareOnce sync.Once
	share     *shareGroups // KIP-932 share groups (share_groups.go)

	producersExpired atomic.Uint64 // idle producers forgotten (producer_stats.go)
}

// Open opens (or creates) the broker in opts.Dir, recovering every queue.
func Open(opts Options) (_ *Broker, err error) {
	if opts.Dir == "" {
		return nil, errors.New("broker: Options.Dir is required")
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch {
	case opts.PreallocateBytes == 0:
		opts.PreallocateBytes = DefaultPreallocateBytes
	case opts.PreallocateBytes < 0:
		opts.PreallocateBytes = 0
	}
	switch {
	case opts.HeadroomBytes == 0:
		opts.HeadroomBytes = DefaultHeadroomBytes
	case opts.HeadroomBytes < 0:
		opts.HeadroomBytes = 0
	}
	switch {
	case opts.ProducerIDExpiration == 0:
		opts.ProducerIDExpiration = DefaultProducerIDExpiration
	case opts.ProducerIDExpiration < 0:
		opts.ProducerIDExpiration = 0 // IdleSince: never
	}
	if opts.SnapshotEvery <= 0 {
		opts.SnapshotEvery = 100_000
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 128 << 20
	}
	if opts.Files == nil {
		opts.Files = storage.NewFileCache(storage.FileCacheOptions{})
	}
	if err := vfs.MkdirAllDurable(opts.FS, filepath.Join(opts.Dir, "queues")); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	lock, err := vfs.LockDir(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Release()
		}
	}()
	if err := checkFormat(opts.FS, opts.Dir, opts.Logger); err != nil {
		return nil, err
	}
	disk, err := diskguard.New(opts.FS, opts.Dir, opts.HeadroomBytes, opts.Logger, opts.Now)
	if err != nil {
		return nil, fmt.Errorf("broker: headroom: %w", err)
	}
	cat, data, err := openCatalog(opts.FS, opts.Dir, opts.Logger)
	if err != nil {
		return nil, err
	}
	receipts, err := loadReceiptKey(opts.FS, opts.Dir, opts.Logger)
	if err != nil {
		return nil, err
	}
	b := &Broker{opts: opts, log: opts.Logger, cat: cat, queues: map[string]*queueRT{}, unavailable: data.Unavailable,
		lock: lock, disk: disk, receipts: receipts}
	for name, u := range data.Unavailable {
		b.log.Error("queue unavailable: its settings are damaged in both copies; every other queue is served, and DeleteQueue removes it",
			"queue", name, "err", u.err)
	}
	for _, s := range data.Queues {
		q, err := openQueue(b, s)
		if err != nil {
			// One queue's damage must not keep every other queue from
			// being served.
			b.log.Error("queue unavailable: it could not be opened; every other queue is served, and DeleteQueue removes it",
				"queue", s.Name, "err", err)
			b.unavailable[s.Name] = unavailableQueue{queueDir(opts.Dir, s), err}
			continue
		}
		b.queues[s.Name] = q
	}
	if opts.Cluster != nil {
		b.cluster = newClusterRT(b, opts.Cluster)
	}
	if b.streams, err = openStreams(b, data); err != nil {
		b.closeQueues()
		return nil, err
	}
	if err := b.resumeRedrives(); err != nil {
		b.streams.close()
		b.closeQueues()
		return nil, fmt.Errorf("broker: %w", err)
	}
	if b.cluster != nil {
		if err := b.openClusterGroups(opts.Cluster); err != nil {
			b.streams.close()
			b.closeQueues()
			return nil, err
		}
	}
	b.log.Info("broker open", "dir", opts.Dir, "queues", len(b.queues), "sync", opts.Sync.String())
	if b.cluster != nil {
		go b.cluster.run()
		b.cluster.background(b.cluster.txn.loop) // cluster_txn.go
	}
	return b, nil
}

// Close stops background work, writes what is pending and closes every log.
// Nothing acknowledged before Close is lost.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed || b.closing {
		b.mu.Unlock()
		return nil
	}
	b.closing = true
	b.mu.Unlock()
	if b.cluster != nil {
		b.cluster.close() // no more topics created or hosted while they close
	}
	// Redrives stop first, while the queues still answer: a task finishes
	// the batch it is moving, ack included. Closed queues would refuse that
	// ack after the copies were sent, and the restart would move them again.
	b.stopRedrives()
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	if b.stopMaint != nil {
		close(b.stopMaint)
		<-b.maintDone
		b.cleaner.wait() // a pass in progress stops at its next batch
	}
	return errors.Join(b.streams.close(), b.closeQueues(), b.lock.Release())
}

// closeQueues closes every queue, closeWorkers at a time: each close may
// end with an fdatasync of its logs, and overlapping them takes 100,000
// queues' close from about 50 s to a few.
func (b *Broker) closeQueues() error {
	b.mu.RLock()
	qs := make([]*queueRT, 0, len(b.queues))
	for _, q := range b.queues {
		qs = append(qs, q)
	}
	b.mu.RUnlock()
	return closeAll(qs, func(q *queueRT) error { return q.close() })
}

// closeWorkers bounds the closes closeAll runs at once.
const closeWorkers = 16

// closeAll calls closeFn on every item, closeWorkers at a time, and joins
// the errors.
func closeAll[T any](items []T, closeFn func(T) error) error {
	errs := make([]error, len(items))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(closeWorkers, len(items)) {
		wg.Go(func() {
			for i := range next {
				errs[i] = closeFn(items[i])
			}
		})
	}
	for i := range items {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (b *Broker) now() time.Time { return b.opts.Now() }

// queue finds an open queue by name.
func (b *Broker) queue(name string) (*queueRT, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	q := b.queues[name]
	if q == nil {
		if _, ok := b.unavailable[name]; ok {
			return nil, fmt.Errorf("%w: %s", ErrQueueUnavailable, name)
		}
		return nil, fmt.Errorf("%w: %s", ErrQueueNotFound, name)
	}
	return q, nil
}

// ListQueues returns the names of all queues that start with prefix, sorted.
func (b *Broker) ListQueues(prefix string) []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var names []string
	for n := range b.queues {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	for n := range b.unavailable {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	if b.cluster != nil {
		names = append(names, b.cluster.queueNames(prefix)...) // cluster_queues.go
		sort.Strings(names)
		return slices.Compact(names)
	}
	sort.Strings(names)
	return names
}

// StartMaintenance runs Maintain every interval until Close. The server
// calls it; tests call Maintain directly with a fake clock instead.
func (b *Broker) StartMaintenance(interval time.Duration) {
	b.stopMaint = make(chan struct{})
	b.maintDone = make(chan struct{})
	b.startCleaner(b.stopMaint)
	go func() {
		defer close(b.maintDone)
		t := time.NewTimer(untilAligned(interval))
		defer t.Stop()
		for {
			select {
			case <-b.stopMaint:
				return
			case <-t.C:
				b.Maintain()
				t.Reset(untilAligned(interval))
			}
		}
	}()
}

// Maintain does the periodic work: retention, deleting log segments every
// cursor has finished, waking long-polls whose messages came due, and
// leaving the full-disk state once there is room again.
func (b *Broker) Maintain() {
	b.disk.Recover()
	b.mu.RLock()
	qs := make([]*queueRT, 0, len(b.queues))
	for _, q := range b.queues {
		qs = append(qs, q)
	}
	b.mu.RUnlock()
	for _, q := range qs {
		if err := q.maintain(); err != nil {
			b.log.Warn("queue maintenance failed", "queue", q.name, "err", err)
		}
	}
	b.streams.maintain()
}

// Health reports whether the broker's writes work: nil, or why not (the
// disk is full, or failing; in a cluster, the Raft host stopped or stalled
// on a full disk), for /readyz.
func (b *Broker) Health() error {
	if err := b.disk.Health(); err != nil {
		return err
	}
	if b.cluster != nil {
		return b.cluster.health()
	}
	return nil
}
