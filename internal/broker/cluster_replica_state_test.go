package broker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/producer"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// A partition's replicas decide at apply what each entry does — an idempotent producer's
// duplicate, gap or fenced epoch, a transaction marker that is stale — from the producer
// and transaction state. A replica that restarts, or a new replica filled from a peer,
// starts from a checkpoint (the group's Raft snapshot) and applies the entries after it:
// it must decide every one of them as the replicas that never stopped do, or its log, and
// every offset after the first difference, is not theirs.
//
// TestReplicaRestoredDecidesAsTheOthers is model-based: random entries of idempotent and
// transactional producers (in order, retried, with gaps, new epochs, zombies, markers
// repeated after their transaction ended), fillers that push producers past any scan
// window, and trims, applied to a reference replica; then the same entries applied to a
// replica restarted from a checkpoint (its local snapshots newer than the checkpoint, as
// maintenance leaves them) and to a new replica that pulled the checkpoint's records from
// a peer. Every entry after the checkpoint must come out the same on all three.
func TestReplicaRestoredDecidesAsTheOthers(t *testing.T) {
	seeds := envInt("SLUICE_REPLICA_STATE_SEEDS", 12)
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { replicaStateRun(t, uint64(seed)) })
	}
}

// replicaOp is one entry of a partition's group: batches to apply, a trim, or a forget
// entry.
type replicaOp struct {
	what   string
	raws   [][]byte
	trim   int64                   // with raws and forget nil
	forget []replpart.IdleProducer // with raws nil
}

// opResult is what an entry did, in the terms every replica must agree on.
type opResult struct {
	bases []int64
	dups  []bool
	errs  []bool
	start int64   // after a trim
	prods []int64 // the producers remembered after a forget entry
}

func (o opResult) String() string {
	return fmt.Sprintf("bases %v duplicates %v refused %v start %d producers %v", o.bases, o.dups, o.errs, o.start, o.prods)
}

func applyReplicaOp(t *testing.T, r *replicaLog, op replicaOp) opResult {
	t.Helper()
	if op.forget != nil {
		if err := r.ForgetProducers(op.forget); err != nil {
			t.Fatalf("%s: %v", op.what, err)
		}
		var o opResult
		for _, a := range r.p.prod.Producers() {
			o.prods = append(o.prods, a.ID)
		}
		return o
	}
	if op.raws == nil {
		res, err := r.Trim(op.trim)
		if err != nil {
			t.Fatalf("%s: %v", op.what, err)
		}
		return opResult{start: res.Start, errs: []bool{res.Err != nil}}
	}
	res, err := r.Apply(3, op.raws)
	if err != nil {
		t.Fatalf("%s: %v", op.what, err)
	}
	return resultOf(res)
}

func resultOf(res []replpart.BatchResult) opResult {
	var o opResult
	for _, br := range res {
		o.bases, o.dups, o.errs = append(o.bases, br.Base), append(o.dups, br.Duplicate), append(o.errs, br.Err != nil)
	}
	return o
}

// replicaOpGen makes the entries, applying each to the reference replica as it goes (a
// trim's offset is drawn below the reference's high watermark).
type replicaOpGen struct {
	t   testing.TB
	rnd *rand.Rand
	ref *replicaLog
	// idempotent producers: epoch, next sequence, their batches so far (for retries)
	epoch   []int16
	next    []int32
	history [][][]byte
	// transactional producers: epoch, next sequence, open here, decisions, last marker
	tEpoch  []int16
	tNext   []int32
	tOpen   []bool
	tSeq    []int32
	tMarker [][]byte
	n       int
}

// newReplicaOpGen makes entries from seed for four idempotent and two transactional
// producers, applying them to ref.
func newReplicaOpGen(t testing.TB, seed uint64, ref *replicaLog) *replicaOpGen {
	return &replicaOpGen{t: t, rnd: rand.New(rand.NewPCG(seed, 7)), ref: ref,
		epoch: make([]int16, 4), next: make([]int32, 4), history: make([][][]byte, 4),
		tEpoch: make([]int16, 2), tNext: make([]int32, 2), tOpen: make([]bool, 2), tSeq: make([]int32, 2), tMarker: make([][]byte, 2)}
}

func (g *replicaOpGen) build(recs int, prod *batch.Producer, txn bool) []byte {
	var rs []batch.Record
	for i := range recs {
		rs = append(rs, batch.Record{Timestamp: 1, Value: fmt.Appendf(nil, "%d.%d", g.n, i)})
	}
	raw, err := batch.Build(rs, batch.Options{LeaderEpoch: -1, Producer: prod, Transactional: txn})
	if err != nil {
		g.t.Fatal(err)
	}
	return raw
}

func (g *replicaOpGen) op() replicaOp {
	g.n++
	k := g.rnd.IntN(len(g.epoch))
	tk := g.rnd.IntN(len(g.tEpoch))
	pid, tpid := int64(10+k), int64(50+tk)
	idem := func(seq int32, epoch int16, n int) []byte {
		return g.build(n, &batch.Producer{ID: pid, Epoch: epoch, BaseSequence: seq}, false)
	}
	switch x := g.rnd.IntN(100); {
	case x < 30:
		n := 1 + g.rnd.IntN(3)
		raw := idem(g.next[k], g.epoch[k], n)
		g.next[k] += int32(n)
		g.history[k] = append(g.history[k], raw)
		return replicaOp{what: fmt.Sprintf("producer %d: next batch", pid), raws: [][]byte{raw}}
	case x < 42 && len(g.history[k]) > 0:
		h := g.history[k]
		raw := h[max(0, len(h)-1-g.rnd.IntN(7))]
		return replicaOp{what: fmt.Sprintf("producer %d: a retry", pid), raws: [][]byte{raw}}
	case x < 46:
		return replicaOp{what: fmt.Sprintf("producer %d: a gap", pid), raws: [][]byte{idem(g.next[k]+5, g.epoch[k], 1)}}
	case x < 49:
		g.epoch[k]++
		raw := idem(0, g.epoch[k], 1)
		g.next[k], g.history[k] = 1, [][]byte{raw}
		return replicaOp{what: fmt.Sprintf("producer %d: epoch %d", pid, g.epoch[k]), raws: [][]byte{raw}}
	case x < 52 && g.epoch[k] > 0:
		return replicaOp{what: fmt.Sprintf("producer %d: a zombie", pid), raws: [][]byte{idem(g.next[k], g.epoch[k]-1, 1)}}
	case x < 66:
		return replicaOp{what: "filler", raws: [][]byte{g.build(300+g.rnd.IntN(2200), nil, false)}}
	case x < 76:
		raw := g.build(1+g.rnd.IntN(2), &batch.Producer{ID: tpid, Epoch: g.tEpoch[tk], BaseSequence: g.tNext[tk]}, true)
		g.tNext[tk] += int32(batchRecords(raw))
		g.tOpen[tk] = true
		return replicaOp{what: fmt.Sprintf("transactional producer %d: a batch", tpid), raws: [][]byte{raw}}
	case x < 86 && g.tOpen[tk]:
		g.tSeq[tk]++
		raw, err := batch.BuildMarker(tpid, g.tEpoch[tk], g.rnd.IntN(2) == 0, g.tSeq[tk], int64(g.n)*time.Minute.Milliseconds()) // a minute an entry: trims forget old markers
		if err != nil {
			g.t.Fatal(err)
		}
		g.tOpen[tk], g.tMarker[tk] = false, raw
		return replicaOp{what: fmt.Sprintf("transactional producer %d: marker %d", tpid, g.tSeq[tk]), raws: [][]byte{raw}}
	case x < 92 && g.tMarker[tk] != nil:
		return replicaOp{what: fmt.Sprintf("transactional producer %d: its last marker again", tpid), raws: [][]byte{g.tMarker[tk]}}
	case x < 97:
		l := g.ref.p.log
		start, hw := l.LogStartOffset(), l.HighWatermark()
		to := start + (hw-start)*int64(40+g.rnd.IntN(61))/100
		return replicaOp{what: fmt.Sprintf("trim to %d", to), trim: to}
	case x < 99:
		// The leader's forget entry: some producers with their last batch, some with an
		// older one (they wrote after the leader listed them: kept).
		op := replicaOp{what: "forget idle producers", forget: []replpart.IdleProducer{}}
		for _, a := range g.ref.p.prod.Producers() {
			switch g.rnd.IntN(4) {
			case 0, 1:
				op.forget = append(op.forget, replpart.IdleProducer{ID: a.ID, LastBase: a.LastBase})
			case 2:
				op.forget = append(op.forget, replpart.IdleProducer{ID: a.ID, LastBase: a.LastBase - 1})
			}
		}
		return op
	}
	return replicaOp{what: "filler", raws: [][]byte{g.build(1+g.rnd.IntN(50), nil, false)}}
}

func batchRecords(raw []byte) int {
	h, _ := batch.ParseHeader(raw)
	return int(h.LastOffsetDelta) + 1
}

func replicaStateRun(t *testing.T, seed uint64) {
	const ops = 360
	_, ref := openReplicaLog(t, vfs.NewMem())
	g := newReplicaOpGen(t, seed, ref)
	var list []replicaOp
	var want []opResult
	for range ops {
		op := g.op()
		list = append(list, op)
		want = append(want, applyReplicaOp(t, ref, op))
	}
	cpAt := 150 + g.rnd.IntN(120)
	restartAt := cpAt + g.rnd.IntN(60)

	check := func(t *testing.T, who string, r *replicaLog, from int) {
		t.Helper()
		for i := from; i < ops; i++ {
			if got := applyReplicaOp(t, r, list[i]); got.String() != want[i].String() {
				t.Fatalf("seed %d, %s, entry %d (%s; checkpoint after entry %d): %v, the reference replica: %v",
					seed, who, i, list[i].what, cpAt, got, want[i])
			}
		}
		if got, w := r.p.log.HighWatermark(), ref.p.log.HighWatermark(); got != w {
			t.Fatalf("seed %d, %s: log ends at %d, the reference's at %d", seed, who, got, w)
		}
	}

	fsys := vfs.NewMem()
	b, r := openReplicaLog(t, fsys)
	for i := range cpAt {
		applyReplicaOp(t, r, list[i])
	}
	cp, err := r.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}

	// A new replica: the checkpoint's records pulled from this one.
	t.Run("new replica", func(t *testing.T) {
		_, fresh := openReplicaLog(t, vfs.NewMem())
		for {
			err := fresh.Restore(cp)
			var behind *replpart.BehindError
			if !errors.As(err, &behind) {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
			rg, err := r.ReadRange(behind.From, behind.To, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if err := fresh.AppendRange(behind.From, rg); err != nil {
				t.Fatal(err)
			}
		}
		check(t, "a new replica filled from a peer", fresh, cpAt)
	})

	// The same replica restarted: it applied more, maintenance wrote its snapshots past the
	// checkpoint, it was closed, and it comes back to the checkpoint.
	for i := cpAt; i < restartAt; i++ {
		applyReplicaOp(t, r, list[i])
	}
	if err := r.p.prod.MaybeSnapshot(r.p.log, fsys, r.p.dir, true); err != nil {
		t.Fatal(err)
	}
	if err := r.p.txn.maybeSnapshot(r.p.log, fsys, r.p.dir, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := Open(Options{Dir: "/data", FS: fsys, Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	_, p, err := b2.streams.partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	restarted := &replicaLog{b: b2, p: p, appliedEnd: -1, withState: atLevel}
	t.Run("restarted", func(t *testing.T) {
		if err := restarted.Restore(cp); err != nil {
			t.Fatal(err)
		}
		check(t, "the replica restarted", restarted, cpAt)
	})
}

// TestReplicaWithoutRoomDecidesAsTheOthers: a replica whose disk has no room for one of an
// entry's batches cuts back what it appended of the entry and applies the entry again once
// there is room (replpart.Log's contract); it must then decide it, and every entry after
// it, as a replica whose disk never filled. Entries of several batches (of producers in
// any state, markers among them) meet a write refused after a random number of them.
func TestReplicaWithoutRoomDecidesAsTheOthers(t *testing.T) {
	seeds := envInt("SLUICE_REPLICA_STATE_SEEDS", 12)
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			_, ref := openReplicaLog(t, vfs.NewMem())
			efs := vfs.NewErrorFS(vfs.NewMem())
			_, full := openReplicaLog(t, efs)
			g := newReplicaOpGen(t, uint64(seed), ref)
			stalls := 0
			for i := range 300 {
				op := g.op()
				for op.raws != nil && g.rnd.IntN(2) == 0 { // several batches in one entry
					more := g.op()
					if more.raws == nil {
						break
					}
					op.what += "; " + more.what
					op.raws = append(op.raws, more.raws...)
				}
				want := applyReplicaOp(t, ref, op)
				applied := false
				if op.raws != nil && g.rnd.IntN(3) == 0 {
					room := int32(g.rnd.IntN(len(op.raws)))
					var writes atomic.Int32
					efs.Inject(vfs.Fault{Err: syscall.ENOSPC, Match: func(o vfs.Op, path string) bool {
						return o == vfs.OpWrite && strings.HasSuffix(path, ".log") && writes.Add(1) > room
					}})
					res, err := full.Apply(3, op.raws)
					efs.ClearFaults()
					switch {
					case err == nil: // nothing of it was written (duplicates, refusals, markers ignored)
						applied = true
						if got := resultOf(res); got.String() != want.String() {
							t.Fatalf("seed %d, entry %d (%s): %v, the reference replica: %v", seed, i, op.what, got, want)
						}
					case vfs.NoSpace(err):
						stalls++
					default:
						t.Fatalf("entry %d (%s) without room: %v", i, op.what, err)
					}
				}
				if applied {
					continue
				}
				if got := applyReplicaOp(t, full, op); got.String() != want.String() {
					t.Fatalf("seed %d, entry %d (%s), applied again once there was room: %v, the reference replica: %v",
						seed, i, op.what, got, want)
				}
			}
			if stalls == 0 {
				t.Fatal("no entry found the disk full")
			}
		})
	}
}

// FuzzDecodeCheckpoint: any partition checkpoint decodes or is refused, never panics, and
// the state it carries is bounded by its size.
func FuzzDecodeCheckpoint(f *testing.F) {
	_, r := openReplicaLog(f, vfs.NewMem())
	g := newReplicaOpGen(f, 1, r)
	for range 40 {
		op := g.op()
		if op.raws != nil {
			if _, err := r.Apply(2, op.raws); err != nil {
				f.Fatal(err)
			}
		}
	}
	f.Add(r.encodeCheckpoint(true))
	f.Add(r.encodeCheckpoint(false))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := decodeCheckpoint(data)
		if err != nil {
			return
		}
		if cp.hw < 0 || cp.start < 0 || cp.start > cp.hw {
			t.Fatalf("decoded high watermark %d, log start %d", cp.hw, cp.start)
		}
		var ps producer.State
		if ps.Decode(cp.producers, 0) == nil && len(ps.Producers()) > len(data) {
			t.Fatalf("%d producers from %d bytes", len(ps.Producers()), len(data))
		}
		var tp txnPartition
		tp.mu.Lock()
		defer tp.mu.Unlock()
		if tp.decodeLocked(cp.txns, cp.hw, true) == nil && len(tp.open)+len(tp.aborted)+len(tp.seq) > len(data) {
			t.Fatalf("%d transactions from %d bytes", len(tp.open)+len(tp.aborted)+len(tp.seq), len(data))
		}
	})
}
