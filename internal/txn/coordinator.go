package txn

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Effects is what a transaction does outside the coordinator.
type Effects interface {
	// InitProducer gives a transactional id its producer id at an epoch
	// above floor and above any it gave before (a fresh id on first use or
	// past the last epoch), durably: the old epochs are fenced. floor is
	// the epoch the coordinator knows (-1: none), which EndTxn v5's bumps
	// (made in the coordinator's own log, not here) may have moved on.
	InitProducer(transactionalID string, floor int16) (id int64, epoch int16, err error)
	// WriteMarkers appends a commit or abort marker m to every partition
	// (partitions gone are skipped). Repeated after a crash: readers must
	// tolerate a marker twice.
	WriteMarkers(m Marker, parts []Partition) error
	// CommitOffsets applies a committed transaction's offsets to their
	// groups. Repeated after a crash: setting an offset twice is harmless.
	CommitOffsets(offsets []Offset) error
	// ForgetProducer drops an expired transactional id's producer id.
	ForgetProducer(transactionalID string) error
}

// Config configures a Coordinator.
type Config struct {
	FS  vfs.FS
	Dir string // holds transactions.log
	Now func() time.Time
	// MaxTimeout is transaction.max.timeout.ms: a producer asking more is
	// refused. Default 15 minutes, Kafka's.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms: an id without a
	// transaction open or completing and unused this long is forgotten
	// (its next InitProducerId starts afresh). Default 7 days, Kafka's.
	IDExpiration time.Duration
	Effects      Effects
	// Store, when set, replaces transactions.log (FS and Dir are then unused): every
	// record is handed to it, and Initial is the state to start from. A cluster's
	// controller keeps its records in the metadata group so.
	Store   Store
	Initial []*Txn
}

// Store keeps the coordinator's records elsewhere than in its own file.
type Store interface {
	// Put starts making t the durable state of its id, and returns a wait
	// that returns once it is, or why it will not be. Put is called with
	// the coordinator's lock held, one record at a time, in order: records
	// must become durable in that order (a later one may stand without an
	// earlier one that failed: each is its id's whole state). The wait is
	// called without the lock, by any goroutine, any number of times.
	Put(t *Txn) (wait func() error, err error)
	// Remove forgets an expired id durably.
	Remove(id string) error
}

// Kafka's defaults: transaction.max.timeout.ms, transactional.id.expiration.ms.
const (
	DefaultMaxTimeout   = 15 * time.Minute
	DefaultIDExpiration = 7 * 24 * time.Hour
)

// Coordinator holds every transactional id's state. Safe for concurrent use.
type Coordinator struct {
	cfg Config

	mu     sync.Mutex // guards everything below; never held across Effects
	txns   map[string]*Txn
	byPID  map[int64]string
	busy   map[string]bool // completion running, outside mu
	log    *stateLog
	closed bool
	// pending waits until each id's last record is durable: an answer
	// about id waits for it (unlockSettled), since the state a request
	// sees may have been written, not yet made durable, by another (a
	// retry, Tick).
	pending map[string]func() error
}

// Open reads dir's transactions.log. Transactions caught between Prepare
// and Complete are finished by the first Tick (or a request on them).
func Open(cfg Config) (*Coordinator, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	var l *stateLog
	txns := map[string]*Txn{}
	if cfg.Store == nil {
		var err error
		if l, txns, err = openLog(cfg.FS, cfg.Dir); err != nil {
			return nil, err
		}
	} else {
		for _, t := range cfg.Initial {
			txns[t.ID] = t.clone()
		}
	}
	c := &Coordinator{cfg: cfg, txns: txns, byPID: map[int64]string{}, busy: map[string]bool{}, log: l, pending: map[string]func() error{}}
	for id, t := range txns {
		c.byPID[t.ProducerID] = id
	}
	return c, nil
}

// Close closes the log; later calls fail with ErrClosed.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.log == nil {
		return nil
	}
	return c.log.close()
}

// persistLocked makes t the state of its id: its record is written (or
// proposed, with a Store) and the wait for it to be durable is left to
// whoever answers a request about the id (unlockSettled), so that
// concurrent transactions share syncs (or Raft rounds): nothing is told to
// a client, nor done outside the coordinator (markers, offsets), before
// the state it follows from is durable.
func (c *Coordinator) persistLocked(t *Txn) error {
	if c.closed {
		return ErrClosed
	}
	live := func() []*Txn {
		all := slices.Collect(maps.Values(c.txns))
		all = slices.DeleteFunc(all, func(o *Txn) bool { return o.ID == t.ID })
		return append(all, t)
	}
	if c.cfg.Store != nil {
		wait, err := c.cfg.Store.Put(t.clone())
		if err != nil {
			return err
		}
		c.pending[t.ID] = wait
	} else {
		seq, err := c.log.put(t, live)
		if err != nil {
			return err
		}
		l := c.log
		c.pending[t.ID] = func() error { return l.waitDurable(seq) }
	}
	if old := c.txns[t.ID]; old != nil && old.ProducerID != t.ProducerID {
		delete(c.byPID, old.ProducerID)
	}
	c.txns[t.ID], c.byPID[t.ProducerID] = t, t.ID
	return nil
}

// unlockSettled releases mu, which the caller holds, and then waits until
// id's last record is durable: err, the answer worked out under the lock,
// is given only then (or the log's failure instead of a success).
func (c *Coordinator) unlockSettled(id string, err error) error {
	wait := c.pending[id]
	c.mu.Unlock()
	if wait != nil {
		if werr := wait(); err == nil {
			err = werr
		}
	}
	return err
}

// LogStats counts transactions.log's records and syncs since it was opened:
// Records over Syncs is how many records each fdatasync made durable (the
// group commit of transactions running at once).
type LogStats struct {
	Records, Syncs uint64
}

// LogStats reports transactions.log's counters; false with a Store (a
// cluster's coordinator keeps no file).
func (c *Coordinator) LogStats() (LogStats, bool) {
	if c.log == nil {
		return LogStats{}, false
	}
	return LogStats{Records: c.log.written.Load(), Syncs: c.log.syncs.Load()}, true
}

// Producer is the id and epoch a request carries; ID -1 for none.
type Producer struct {
	ID    int64
	Epoch int16
}

// InitProducerID gives the transactional id its producer id at a new
// epoch, fencing the previous holder, after aborting a transaction it
// left open. expect, when ID is not -1, is the id and epoch the caller
// holds (KIP-360's re-init after an error): any other is fenced.
func (c *Coordinator) InitProducerID(id string, timeout time.Duration, expect Producer) (Producer, error) {
	if timeout <= 0 || timeout > c.cfg.MaxTimeout {
		return Producer{}, fmt.Errorf("%w: %v, the maximum is %v", ErrInvalidTimeout, timeout, c.cfg.MaxTimeout)
	}
	c.mu.Lock()
	t := c.txns[id]
	if t != nil {
		if err := c.checkExpect(t, expect); err != nil {
			return Producer{}, c.unlockSettled(id, err)
		}
		if c.busy[id] || t.State.preparing() {
			c.mu.Unlock()
			go c.finish(id) // a no-op if one is running
			return Producer{}, ErrConcurrent
		}
		if t.State == Ongoing {
			err := c.abortLocked(t, true)
			c.mu.Unlock()
			if err == nil {
				err = c.finish(id)
			}
			if err != nil {
				return Producer{}, err
			}
			return c.setTimeout(id, timeout)
		}
	}
	p, err := c.initLocked(id, t, timeout)
	if err = c.unlockSettled(id, err); err != nil {
		return Producer{}, err
	}
	return p, nil
}

// initLocked gives id (whose transaction t, if any, is not open) its
// producer id at a new epoch.
func (c *Coordinator) initLocked(id string, t *Txn, timeout time.Duration) (Producer, error) {
	if c.closed {
		return Producer{}, ErrClosed
	}
	floor := int16(-1)
	if t != nil {
		floor = t.Epoch
	}
	pid, epoch, err := c.cfg.Effects.InitProducer(id, floor)
	if err != nil {
		return Producer{}, err
	}
	nt := &Txn{ID: id}
	if t != nil {
		nt = t.clone()
	}
	nt.ProducerID, nt.Epoch, nt.LastEpoch, nt.Timeout, nt.Updated = pid, epoch, -1, timeout, c.cfg.Now()
	nt.Ended = noProducer
	if err := c.persistLocked(nt); err != nil {
		return Producer{}, err
	}
	return Producer{ID: pid, Epoch: epoch}, nil
}

// checkExpect applies KIP-360: a re-init names the id and epoch it holds,
// or the epoch the coordinator bumped away from it (a timeout abort), or
// the one an EndTxn v5 ended (Ended: the producer never got the answer
// with the bumped epoch, and re-inits with what it had, as Kafka allows).
func (c *Coordinator) checkExpect(t *Txn, expect Producer) error {
	if expect.ID < 0 || (t.Ended.ID >= 0 && expect == t.Ended) {
		return nil
	}
	bumpedAway := t.LastEpoch >= 0 && expect.Epoch == t.LastEpoch
	if expect.ID != t.ProducerID || (expect.Epoch != t.Epoch && !bumpedAway) {
		return fmt.Errorf("%w: %s is held by producer %d epoch %d, not %d epoch %d",
			ErrFenced, t.ID, t.ProducerID, t.Epoch, expect.ID, expect.Epoch)
	}
	return nil
}

// setTimeout stores the timeout of a re-initialised id after its open
// transaction was aborted, and answers its (already bumped) epoch.
func (c *Coordinator) setTimeout(id string, timeout time.Duration) (_ Producer, err error) {
	c.mu.Lock()
	defer func() { err = c.unlockSettled(id, err) }()
	t := c.txns[id]
	if t.State != CompleteAbort {
		return Producer{}, ErrConcurrent // another request moved it on
	}
	nt := t.clone()
	nt.Timeout, nt.LastEpoch, nt.Ended, nt.Updated = timeout, -1, noProducer, c.cfg.Now()
	if err := c.persistLocked(nt); err != nil {
		return Producer{}, err
	}
	return Producer{ID: nt.ProducerID, Epoch: nt.Epoch}, nil
}

// abortLocked moves an Ongoing transaction to PrepareAbort, bumping the
// epoch first when bump is set (the producer is gone or replaced: fence
// it). The bump is skipped at the epoch's end, where a new producer id
// would leave the markers naming another id than the batches (unless the
// transaction was ended by an EndTxn v5 bump, whose markers name Ended).
func (c *Coordinator) abortLocked(t *Txn, bump bool) error {
	nt := t.clone()
	if bump && t.Epoch < math.MaxInt16-1 {
		pid, epoch, err := c.cfg.Effects.InitProducer(t.ID, t.Epoch)
		if err != nil {
			return err
		}
		if pid == t.ProducerID {
			nt.LastEpoch, nt.Epoch = t.Epoch, epoch
		}
	}
	nt.State, nt.Updated = PrepareAbort, c.cfg.Now()
	c.decidedLocked(nt)
	return c.persistLocked(nt)
}

// decidedLocked counts a decision in nt.Seq, for the markers, when the records are a
// Store's (a cluster's); a single node's log keeps the format older binaries read.
func (c *Coordinator) decidedLocked(nt *Txn) {
	if c.cfg.Store != nil {
		nt.Seq++
	}
}

// checkProducerLocked finds the transaction of id and checks that pid and
// epoch hold it, for the requests a transactional producer sends.
func (c *Coordinator) checkProducerLocked(id string, pid int64, epoch int16) (*Txn, error) {
	return c.checkLocked(id, pid, epoch, false)
}

// checkLocked is checkProducerLocked; abortable (a request version that
// knows TRANSACTION_ABORTABLE) answers ErrAbortable rather than ErrFenced
// to the epoch a timeout abort bumped away, while nothing newer began.
func (c *Coordinator) checkLocked(id string, pid int64, epoch int16, abortable bool) (*Txn, error) {
	if c.closed {
		return nil, ErrClosed
	}
	t := c.txns[id]
	switch {
	case t == nil || t.ProducerID != pid:
		return nil, fmt.Errorf("%w: %s, producer %d", ErrIDMapping, id, pid)
	case abortable && t.bumpedAway(epoch):
		return nil, fmt.Errorf("%w: %s was aborted at its timeout, its epoch bumped from %d to %d", ErrAbortable, id, epoch, t.Epoch)
	case epoch != t.Epoch:
		return nil, fmt.Errorf("%w: %s is at epoch %d, the request has %d", ErrFenced, id, t.Epoch, epoch)
	case c.busy[id] || t.State.preparing():
		return nil, ErrConcurrent
	}
	return t, nil
}

// begin returns a copy of t to change, Ongoing (a new transaction starts
// with the first partition or group added).
func (c *Coordinator) begin(t *Txn) *Txn {
	nt := t.clone()
	now := c.cfg.Now()
	if nt.State != Ongoing {
		nt.reset(Ongoing, now)
		nt.Started = now
		// The producer holds the current epoch: the previous one is no
		// longer a retry (Ended) nor a re-init (LastEpoch) to honour.
		nt.Ended, nt.LastEpoch = noProducer, -1
	}
	nt.Updated = now
	return nt
}

// AddPartitions adds partitions to the producer's transaction, starting
// one if none is open (AddPartitionsToTxn).
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, parts []Partition) (err error) {
	c.mu.Lock()
	defer func() { err = c.unlockSettled(id, err) }()
	t, err := c.checkProducerLocked(id, pid, epoch)
	if err != nil {
		return err
	}
	if t.State == Ongoing && !slices.ContainsFunc(parts, func(p Partition) bool { return !t.HasPartition(p) }) {
		return nil // nothing new: no write
	}
	nt := c.begin(t)
	for _, p := range parts {
		nt.addPartition(p)
	}
	return c.persistLocked(nt)
}

// AddGroup adds a consumer group to the transaction (AddOffsetsToTxn), so
// that its TxnOffsetCommit is applied at commit.
func (c *Coordinator) AddGroup(id string, pid int64, epoch int16, group string) error {
	return c.addGroup(id, pid, epoch, group, false)
}

// AddGroupAbortable is AddGroup for AddOffsetsToTxn v4+, which knows
// TRANSACTION_ABORTABLE (KIP-890).
func (c *Coordinator) AddGroupAbortable(id string, pid int64, epoch int16, group string) error {
	return c.addGroup(id, pid, epoch, group, true)
}

func (c *Coordinator) addGroup(id string, pid int64, epoch int16, group string, abortable bool) (err error) {
	c.mu.Lock()
	defer func() { err = c.unlockSettled(id, err) }()
	t, err := c.checkLocked(id, pid, epoch, abortable)
	if err != nil {
		return err
	}
	if t.State == Ongoing && t.hasGroup(group) {
		return nil
	}
	nt := c.begin(t)
	nt.addGroup(group)
	return c.persistLocked(nt)
}

// CommitOffsets holds offsets of a group added to the open transaction,
// to be applied at commit and dropped at abort (TxnOffsetCommit).
func (c *Coordinator) CommitOffsets(id string, pid int64, epoch int16, offsets []Offset) error {
	return c.commitOffsets(id, pid, epoch, offsets, false)
}

// CommitOffsetsImplicit is TxnOffsetCommit v5+ (KIP-890 part 2): the
// request adds its groups to the transaction itself, beginning one if
// none is open, as AddOffsetsToTxn would have; a producer bumped away by
// a timeout abort is told TRANSACTION_ABORTABLE.
func (c *Coordinator) CommitOffsetsImplicit(id string, pid int64, epoch int16, offsets []Offset) error {
	return c.commitOffsets(id, pid, epoch, offsets, true)
}

func (c *Coordinator) commitOffsets(id string, pid int64, epoch int16, offsets []Offset, implicit bool) (err error) {
	c.mu.Lock()
	defer func() { err = c.unlockSettled(id, err) }()
	t, err := c.checkLocked(id, pid, epoch, implicit)
	if err != nil {
		return err
	}
	if implicit {
		t = c.begin(t)
		for _, o := range offsets {
			t.addGroup(o.Group)
		}
	}
	if t.State != Ongoing {
		return fmt.Errorf("%w: %s is %v, offsets need an open transaction", ErrInvalidState, id, t.State)
	}
	nt := t.clone()
	for _, o := range offsets {
		if !t.hasGroup(o.Group) {
			return fmt.Errorf("%w: group %s was not added to the transaction (AddOffsetsToTxn)", ErrInvalidState, o.Group)
		}
		nt.putOffset(o)
	}
	nt.Updated = c.cfg.Now()
	return c.persistLocked(nt)
}
