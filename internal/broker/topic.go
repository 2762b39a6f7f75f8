package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/producer"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/txn"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// The streams half of the broker lives beside the queue half: topics (each a
// set of partition logs), idempotent producer ids, consumer groups and
// subscriptions. On disk, under Options.Dir:
//
//	topics/<id>-<name>/<partition>/        a storage log per partition
//	topics/<id>-<name>/subs/<id>-<name>/   a subscription: journal/ and snapshot
//	topics/<id>-<name>/<partition>/txn.snapshot  open and aborted transactions (txn_partition.go)
//	producers.json                         allocated producer ids and epochs
//	groups/journal/                        committed offsets (group events)
//	groups/snapshot                        all offsets as of a journal offset
type streams struct {
	b      *Broker
	pids   *producer.IDs
	groups *groupRT
	// txn is the transaction coordinator (txn.go); nil in a cluster.
	txn              *txn.Coordinator
	txnStop, txnDone chan struct{}

	// admin serialises topic and subscription creation, deletion and
	// partition changes, which write the catalog and create or remove
	// directories; produce and fetch never take it.
	admin sync.Mutex

	// mu guards topics and closed. Lock order: streams.mu, then topicRT.mu.
	mu     sync.RWMutex
	topics map[string]*topicRT
	closed bool

	// spread picks the partition of a produce call whose records have no key
	// and no partition: each such call goes to the next partition in turn.
	spread atomic.Uint32
}

// topicRT is one open topic.
type topicRT struct {
	s    *streams
	name string
	dir  string

	// mu guards settings, parts and subs. Readers take it shared for the
	// duration of a lookup only; AddPartitions and subscription changes
	// take it exclusively.
	mu       sync.RWMutex
	settings TopicSettings
	parts    []*partitionRT
	subs     map[string]*subRT
}

// partitionRT is one partition: its log and its idempotent producers.
type partitionRT struct {
	owner *topicRT
	topic string
	index int32
	dir   string
	log   *storage.Log
	prod  producer.State
	txn   txnPartition // open and aborted transactions (txn_partition.go)
	// repl is the partition's Raft group on this node, in a cluster when this node is
	// one of its replicas (cluster_replica.go); nil otherwise.
	repl atomic.Pointer[hostedReplica]
	// clean is what the cleaner last did here (topic_compaction.go).
	clean cleanState
	// retention is the time cut last computed here, expiredBelow the log start the
	// producers and transactions were last expired at (topic_retention.go).
	retention    retentionCache
	expiredBelow atomic.Int64
	// trimming: a retention trim of this replicated partition is being proposed
	// (cluster_retention.go); one at a time.
	trimming atomic.Bool
	// stateFromGroup: a replicated partition, whose producer and transaction state is
	// not built at open nor written to local snapshots, but set by its group's Restore
	// from the checkpoint, which carries it (or, below feature level 4, rebuilt there
	// from the log). Set at open, never changed.
	stateFromGroup bool
}

func topicDir(root string, s TopicSettings) string {
	return filepath.Join(root, "topics", fmt.Sprintf("%d-%s", s.ID, s.Name))
}

// openStreams opens every topic of the catalog, the producer id registry
// and the group coordinator.
func openStreams(b *Broker, data catalogData) (*streams, error) {
	s := &streams{b: b, topics: map[string]*topicRT{}}
	if err := vfs.MkdirAllDurable(b.opts.FS, filepath.Join(b.opts.Dir, "topics")); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	var err error
	if s.pids, err = producer.OpenIDs(b.opts.FS, b.opts.Dir); err != nil {
		return nil, err
	}
	for _, ts := range data.Topics {
		t, err := openTopic(s, ts)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("broker: topic %s: %w", ts.Name, err)
		}
		s.topics[ts.Name] = t
	}
	if err := s.openSubscriptions(data); err != nil {
		s.close()
		return nil, err
	}
	if s.groups, err = openGroups(s); err != nil {
		s.close()
		return nil, err
	}
	s.groups.resume() // the recorded members keep their generation: no rebalance at open
	if b.cluster == nil {
		if err := s.openTxn(); err != nil {
			s.close()
			return nil, err
		}
	}
	// A crash between a topic's deletion from the catalog and the
	// deletion of its offsets left offsets of a topic that is gone.
	for _, topic := range s.groups.offsetTopics() {
		if s.topics[topic] == nil {
			s.groups.setPartitions(topic, 0)
		}
	}
	return s, nil
}

func openTopic(s *streams, ts TopicSettings) (*topicRT, error) {
	t := &topicRT{s: s, name: ts.Name, dir: topicDir(s.b.opts.Dir, ts), settings: ts, subs: map[string]*subRT{}}
	for i := range ts.Partitions {
		p, err := t.openPartition(i)
		if err != nil {
			t.close()
			return nil, err
		}
		t.parts = append(t.parts, p)
	}
	return t, nil
}

// replicaSyncAhead is how many bytes a cluster replica's partition log writes between
// background fdatasyncs (storage.Options.SyncAheadBytes): an eighth of a checkpoint
// interval (replpart.DefaultSnapshotBytes).
const replicaSyncAhead = 1 << 20

// asReplica sets a cluster replica's partition log options.
func asReplica(lo *storage.Options) {
	// The partition's Raft log is what is durable; this log is synced at the
	// group's checkpoints and cut back to the last one after a crash.
	lo.Sync = storage.SyncPolicy{Mode: storage.SyncNever}
	// Zeros written ahead only make an fdatasync after an append cheaper
	// (vfs.Preallocator); synced once per checkpoint (8 MiB), this log would
	// write every byte twice for nothing: 11 % of a W1 replica's CPU.
	lo.PreallocateBytes = 0
	// The checkpoint's Sync ran in the Ready loop, holding every group of the
	// node: with 8 MiB dirty it took 15-38 ms there under W1, several times a
	// second. Synced ahead in the background every replicaSyncAhead bytes, the
	// checkpoint finds at most that much left to write (it now runs on the
	// snapshot's encoding goroutine, replicaLog.CaptureCheckpoint, and still
	// holds the group's next snapshot until it is done).
	lo.SyncAheadBytes = replicaSyncAhead
}

func (t *topicRT) openPartition(i int32) (*partitionRT, error) {
	o := t.s.b.opts
	dir := filepath.Join(t.dir, strconv.Itoa(int(i)))
	// Retention is applied by the topic (see topic_retention.go), not by
	// the log, because subscriptions may hold segments past it.
	lo := t.s.b.logOptions(dir, t.s.b.segmentBytes(t.settings))
	lo.MaxBatchBytes = logMaxBatchBytes
	if t.s.b.cluster != nil {
		asReplica(&lo)
	}
	log, err := storage.Open(lo)
	if err != nil {
		return nil, err
	}
	p := &partitionRT{owner: t, topic: t.name, index: i, dir: dir, log: log}
	if t.s.b.cluster != nil && t.settings.UUID != ([16]byte{}) {
		// A catalog topic's partition is served only once its Raft group is hosted
		// here, and the group's Restore sets the state (cluster_replica.go): built here
		// too it would be thrown away, after a scan of the log since the last local
		// snapshot, which a crash makes the whole log (2.5 s a GiB from a cold cache).
		p.stateFromGroup = true
		return p, nil
	}
	logger := t.s.b.log.With("topic", t.name, "partition", i)
	p.prod.Rebuild(log, o.FS, dir, logger)
	p.txn.rebuild(log, o.FS, dir, logger)
	return p, nil
}

func (t *topicRT) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, sub := range t.subs {
		errs = append(errs, sub.close())
	}
	errs = append(errs, closeAll(t.parts, func(p *partitionRT) error {
		// Before the log closes: its high watermark is final.
		if p.stateFromGroup {
			// Its checkpoints carry the state; a snapshot at the final high watermark,
			// past the last checkpoint, is one its Restore could not use.
			return p.log.Close()
		}
		if err := p.prod.MaybeSnapshot(p.log, t.s.b.opts.FS, p.dir, true); err != nil {
			t.s.b.log.Warn("producer snapshot failed", "topic", t.name, "partition", p.index, "err", err)
		}
		if err := p.txn.maybeSnapshot(p.log, t.s.b.opts.FS, p.dir, true); err != nil {
			t.s.b.log.Warn("transaction snapshot failed", "topic", t.name, "partition", p.index, "err", err)
		}
		return p.log.Close()
	}))
	return errors.Join(errs...)
}

func (s *streams) close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.closed = true
	topics := s.topics
	s.topics = map[string]*topicRT{}
	s.mu.Unlock()
	errs := []error{s.closeTxn()}
	if s.groups != nil {
		errs = append(errs, s.groups.close())
	}
	ts := make([]*topicRT, 0, len(topics))
	for _, t := range topics {
		ts = append(ts, t)
	}
	errs = append(errs, closeAll(ts, func(t *topicRT) error { return t.close() }))
	return errors.Join(errs...)
}

// topic finds an open topic.
func (s *streams) topic(name string) (*topicRT, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	t := s.topics[name]
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	return t, nil
}

// partition finds an open partition.
func (s *streams) partition(topic string, p int32) (*topicRT, *partitionRT, error) {
	t, err := s.topic(topic)
	if err != nil {
		return nil, nil, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if p < 0 || int(p) >= len(t.parts) {
		return nil, nil, fmt.Errorf("%w: %s/%d", ErrUnknownPartition, topic, p)
	}
	return t, t.parts[p], nil
}

// notifySubs wakes the subscriptions' long-polls after an append.
func (t *topicRT) notifySubs() {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, sub := range t.subs {
		sub.notify()
	}
}

// snapshot returns the topic's settings and partitions as of now.
func (t *topicRT) snapshot() (TopicSettings, []*partitionRT) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.settings, append([]*partitionRT(nil), t.parts...)
}

// topicList returns the open topics sorted by name.
func (s *streams) topicList() []*topicRT {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*topicRT, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// maintain runs the periodic work of the streams half: group session
// expiry, subscription upkeep, retention, producer state upkeep.
func (s *streams) maintain() {
	if s == nil {
		return
	}
	s.groups.tick()
	for _, t := range s.topicList() {
		if err := t.maintain(); err != nil {
			s.b.log.Warn("topic maintenance failed", "topic", t.name, "err", err)
		}
	}
}

// mapStorageErr turns storage's errors into the broker's typed ones.
func mapStorageErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return fmt.Errorf("%w: %v", ErrOffsetOutOfRange, err)
	case errors.Is(err, storage.ErrClosed):
		return fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return err
}
