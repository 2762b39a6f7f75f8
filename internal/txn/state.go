package txn

import (
	"errors"
	"math"
	"slices"
	"strings"
	"time"
)

// State is a transaction's state, Kafka's names.
type State uint8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	numStates
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState reads a state name (ListTransactions' filter), case-insensitive.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if strings.EqualFold(n, name) {
			return State(i), true
		}
	}
	return 0, false
}

// noProducer is Producer's "none".
var noProducer = Producer{ID: -1, Epoch: -1}

// preparing reports whether markers are being written: the producer must wait.
func (s State) preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// Errors, matched with errors.Is; the Kafka codes are the front-end's.
var (
	// ErrFenced: the request's epoch is not the transactional id's current
	// one: a newer producer took it over (PRODUCER_FENCED).
	ErrFenced = errors.New("producer fenced: the transactional id has a newer epoch")
	// ErrInvalidState: the request makes no sense in the transaction's
	// state, or a produce names a partition not added (INVALID_TXN_STATE).
	ErrInvalidState = errors.New("invalid transaction state")
	// ErrConcurrent: markers of the previous transaction are being written;
	// retry (CONCURRENT_TRANSACTIONS).
	ErrConcurrent = errors.New("the previous transaction is still completing")
	// ErrNotFound: no such transactional id (TRANSACTIONAL_ID_NOT_FOUND).
	ErrNotFound = errors.New("transactional id not found")
	// ErrIDMapping: the producer id is not the transactional id's
	// (INVALID_PRODUCER_ID_MAPPING).
	ErrIDMapping = errors.New("producer id does not belong to this transactional id")
	// ErrInvalidTimeout: transaction.timeout.ms above the broker's maximum
	// or not positive (INVALID_TRANSACTION_TIMEOUT).
	ErrInvalidTimeout = errors.New("invalid transaction timeout")
	// ErrClosed: the coordinator is closed or its log failed
	// (COORDINATOR_NOT_AVAILABLE).
	ErrClosed = errors.New("transaction coordinator not available")
	// ErrAbortable: the request carries the epoch the coordinator bumped
	// away when it aborted the transaction at its timeout; the producer
	// may abort (EndTxn v5 at that epoch succeeds and answers the current
	// one) and go on (TRANSACTION_ABORTABLE, KIP-890). Only the requests
	// of versions that know the code get it; older ones are fenced.
	ErrAbortable = errors.New("the transaction was aborted by the coordinator (its timeout): abort it to go on")
)

// Partition is one topic partition in a transaction.
type Partition struct {
	Topic     string
	Partition int32
}

func comparePartition(a, b Partition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// Offset is one offset committed inside a transaction (TxnOffsetCommit),
// applied to its group at commit only.
type Offset struct {
	Group       string
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// Txn is the whole state of one transactional id: what the log stores
// and Describe answers.
type Txn struct {
	ID         string
	ProducerID int64
	Epoch      int16
	// LastEpoch is the epoch before the coordinator's own bump (a timeout
	// abort), -1 if none: the producer that held it may still re-init
	// with it (KIP-360), everything else it sends is fenced.
	LastEpoch int16
	// Ended is the producer id and epoch the last transaction ran under
	// when an EndTxn v5 (KIP-890 part 2) bumped the epoch at its end, ID
	// -1 if none: its markers name this id (its batches' producer) with
	// the bumped epoch, and a retry of that EndTxn is answered with the
	// current producer. Cleared when the next transaction begins.
	Ended Producer
	// Seq counts the transactions of this id that reached a decision (Prepare), when the
	// coordinator keeps its records in a Store (a cluster); 0 otherwise. Markers carry it:
	// a partition replica ignores a marker whose Seq is not above the last it applied for
	// the producer (serial arithmetic: it wraps).
	Seq        uint32
	State      State
	Timeout    time.Duration
	Partitions []Partition // sorted, no duplicates
	Groups     []string    // sorted, no duplicates
	Offsets    []Offset    // pending; one per group/topic/partition, the last sent
	Started    time.Time   // when the transaction became Ongoing; zero otherwise
	Updated    time.Time
}

func (t *Txn) clone() *Txn {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	c.Groups = slices.Clone(t.Groups)
	c.Offsets = slices.Clone(t.Offsets)
	return &c
}

func (t *Txn) addPartition(p Partition) {
	i, found := slices.BinarySearchFunc(t.Partitions, p, comparePartition)
	if !found {
		t.Partitions = slices.Insert(t.Partitions, i, p)
	}
}

// bumpedAway reports whether epoch is the one a timeout abort bumped
// away from, with nothing begun since (the abort is still the last word).
func (t *Txn) bumpedAway(epoch int16) bool {
	return t.LastEpoch >= 0 && epoch == t.LastEpoch && (t.State == PrepareAbort || t.State == CompleteAbort)
}

// HasPartition reports whether p was added to the transaction.
func (t *Txn) HasPartition(p Partition) bool {
	_, found := slices.BinarySearchFunc(t.Partitions, p, comparePartition)
	return found
}

func (t *Txn) addGroup(g string) {
	i, found := slices.BinarySearch(t.Groups, g)
	if !found {
		t.Groups = slices.Insert(t.Groups, i, g)
	}
}

func (t *Txn) hasGroup(g string) bool {
	_, found := slices.BinarySearch(t.Groups, g)
	return found
}

func (t *Txn) putOffset(o Offset) {
	for i, old := range t.Offsets {
		if old.Group == o.Group && old.Topic == o.Topic && old.Partition == o.Partition {
			t.Offsets[i] = o
			return
		}
	}
	t.Offsets = append(t.Offsets, o)
}

// marker is the producer id and epoch the markers of the transaction
// completing carry: after an EndTxn v5 the id its batches carry and the
// bumped epoch (the highest an id has, math.MaxInt16, when the bump ran
// out of epochs and gave the transactional id a new producer id).
func (t *Txn) marker() (int64, int16) {
	switch {
	case t.Ended.ID < 0 || t.Ended.ID == t.ProducerID:
		return t.ProducerID, t.Epoch
	default:
		return t.Ended.ID, math.MaxInt16
	}
}

// reset ends a transaction: nothing in it any more.
func (t *Txn) reset(s State, now time.Time) {
	t.State, t.Partitions, t.Groups, t.Offsets, t.Started, t.Updated = s, nil, nil, nil, time.Time{}, now
}

// Marker is what a completion's markers carry: the producer id and epoch (Txn.marker), the
// decision, and the transaction's Seq.
type Marker struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	Seq        uint32
}
