package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/vfs"
)

var bg = context.Background()

// The first message of two queues used to have the same receipt, and one
// queue's acked the other's message.
func TestReceiptOfOneQueueRefusedByAnother(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "a"})
	e.createQueue(QueueSettings{Name: "b"})
	e.send("a", "in a")
	e.send("b", "in b")
	da, db := e.receive("a", 1)[0], e.receive("b", 1)[0]
	if da.Sequence != db.Sequence || da.FencingToken != db.FencingToken {
		t.Fatalf("want the same message index in both: %d/%d, %d/%d", da.Sequence, db.Sequence, da.FencingToken, db.FencingToken)
	}
	if da.Receipt == db.Receipt {
		t.Fatalf("both queues handed out receipt %q", da.Receipt)
	}
	for _, op := range leaseOps {
		if err := op.call(e.b, "b", da.Receipt); !errors.Is(err, ErrReceiptInvalid) {
			t.Errorf("%s of a's receipt on b = %v, want ErrReceiptInvalid", op.name, err)
		}
	}
	if res, err := e.b.AckBatch(bg, "b", []string{da.Receipt}); err != nil || !errors.Is(res[0], ErrReceiptInvalid) {
		t.Errorf("AckBatch of a's receipt on b = %v, %v", res, err)
	}
	// Nothing of b changed: its own receipt is still current.
	if err := e.b.Ack(bg, "b", db.Receipt); err != nil {
		t.Fatalf("ack of b's own receipt: %v", err)
	}
	if err := e.b.Ack(bg, "a", da.Receipt); err != nil {
		t.Fatalf("ack of a's own receipt: %v", err)
	}
}

// leaseOps are the receipt operations a queue has.
var leaseOps = []struct {
	name string
	call func(b *Broker, queue, receipt string) error
}{
	{"Ack", func(b *Broker, q, r string) error { return b.Ack(bg, q, r) }},
	{"Extend", func(b *Broker, q, r string) error { return b.Extend(bg, q, r, 0) }},
	{"Nack", func(b *Broker, q, r string) error { return b.Nack(bg, q, r, 0, "") }},
}

func TestRecreatedQueueRefusesOldReceipts(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "a"})
	e.send("a", "old")
	old := e.receive("a", 1)[0]
	if err := e.b.DeleteQueue("a"); err != nil {
		t.Fatal(err)
	}
	e.createQueue(QueueSettings{Name: "a"})
	e.send("a", "new")
	cur := e.receive("a", 1)[0]
	for _, op := range leaseOps {
		if err := op.call(e.b, "a", old.Receipt); !errors.Is(err, ErrReceiptInvalid) {
			t.Errorf("%s of the deleted queue's receipt = %v, want ErrReceiptInvalid", op.name, err)
		}
	}
	if err := e.b.Ack(bg, "a", cur.Receipt); err != nil {
		t.Fatalf("ack of the new queue's receipt: %v", err)
	}
}

func TestSubscriptionReceiptBoundToItsSubscription(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	e.createSub(SubscriptionSettings{Topic: "t", Name: "s1"})
	e.createSub(SubscriptionSettings{Topic: "t", Name: "s2"})
	e.createQueue(QueueSettings{Name: "q"})
	e.produce("t", kv("k", "v"))
	d1, d2 := e.subReceive("t", "s1", 1)[0], e.subReceive("t", "s2", 1)[0]
	if err := e.b.SubscriptionAck(bg, "t", "s2", d1.Receipt); !errors.Is(err, ErrReceiptInvalid) {
		t.Errorf("s1's receipt on s2 = %v, want ErrReceiptInvalid", err)
	}
	if err := e.b.Ack(bg, "q", d1.Receipt); !errors.Is(err, ErrReceiptInvalid) {
		t.Errorf("s1's receipt on a queue = %v, want ErrReceiptInvalid", err)
	}
	e.subAck("t", "s1", d1)
	e.subAck("t", "s2", d2)
}

func TestReceiptDamagedOrForgedRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "a"})
	e.send("a", "x")
	d := e.receive("a", 1)[0]
	if len(d.Receipt) > 48 || strings.ContainsAny(d.Receipt, "+/=:") {
		t.Fatalf("receipt %q: want short and URL-safe", d.Receipt)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range d.Receipt {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, d.Receipt[i])+1)%64], alphabet[(strings.IndexByte(alphabet, d.Receipt[i])+32)%64]} {
			bad := d.Receipt[:i] + string(c) + d.Receipt[i+1:]
			if err := e.b.Ack(bg, "a", bad); !errors.Is(err, ErrReceiptInvalid) {
				t.Fatalf("receipt with character %d changed (%q) = %v, want ErrReceiptInvalid", i, bad, err)
			}
		}
	}
	// The same fields under another key: what a forger without the key makes.
	other := receiptBinding{key: newReceiptKey(make([]byte, receiptKeyLen)), kind: receiptOfQueue, id: e.b.queues["a"].bind.id}
	forged := other.issue(0, d.Sequence, d.FencingToken)
	for _, bad := range []string{forged, "", d.Receipt + "A", d.Receipt[:len(d.Receipt)-1], "0:" + d.Receipt, d.Receipt[:8] + "\n" + d.Receipt[8:]} {
		if err := e.b.Ack(bg, "a", bad); !errors.Is(err, ErrReceiptInvalid) {
			t.Errorf("ack %q = %v, want ErrReceiptInvalid", bad, err)
		}
	}
	if err := e.b.Ack(bg, "a", d.Receipt); err != nil {
		t.Fatalf("the real receipt after the forgeries: %v", err)
	}
}

// A receipt of the first format (the cursor's own, handed out before the
// upgrade, or made by a client from Sequence and FencingToken) is refused
// as stale and changes nothing: the message comes back when its visibility
// ends.
func TestFirstFormatReceiptRefusedAsStale(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "a", VisibilityTimeout: 30e9})
	e.send("a", "x")
	d := e.receive("a", 1)[0]
	legacy := queue.Receipt{Offset: d.Sequence, Token: d.FencingToken}.String()
	for _, op := range leaseOps {
		if err := op.call(e.b, "a", legacy); !errors.Is(err, ErrReceiptStale) {
			t.Errorf("%s of a first-format receipt = %v, want ErrReceiptStale", op.name, err)
		}
	}
	if got := e.receive("a", 1); len(got) != 0 {
		t.Fatalf("the refused receipts made the message visible: %v", bodies(got))
	}
	e.clock.Advance(31e9)
	if got := e.receive("a", 1); len(got) != 1 || got[0].ReceiveCount != 2 {
		t.Fatalf("after the visibility timeout: %+v", got)
	}

	e.createTopic("t", 2)
	e.createSub(SubscriptionSettings{Topic: "t", Name: "s"})
	e.produce("t", kv("k", "v"))
	sd := e.subReceive("t", "s", 1)[0]
	old := "1:" + queue.Receipt{Offset: sd.Offset, Token: sd.FencingToken}.String()
	if sd.Partition == 0 {
		old = "0" + old[1:]
	}
	if err := e.b.SubscriptionAck(bg, "t", "s", old); !errors.Is(err, ErrReceiptStale) {
		t.Errorf("subscription ack of a first-format receipt = %v, want ErrReceiptStale", err)
	}
}

func TestReceiptsSurviveRestartAndCrash(t *testing.T) {
	for _, stop := range []string{"restart", "crash"} {
		t.Run(stop, func(t *testing.T) {
			e := newEnv(t, nil)
			e.createQueue(QueueSettings{Name: "a"})
			e.send("a", "x", "y")
			ds := e.receive("a", 2)
			if stop == "restart" {
				e.restart()
			} else {
				e.crash()
			}
			for _, d := range ds {
				if err := e.b.Ack(bg, "a", d.Receipt); err != nil {
					t.Fatalf("ack after %s: %v", stop, err)
				}
			}
		})
	}
}

// A crash at any point of the key's creation leaves a directory that
// opens, and the key it opens with is the one from then on.
func TestReceiptKeyCreationCrash(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	var cuts []*vfs.MemFS
	efs.Inject(vfs.Fault{Match: func(op vfs.Op, path string) bool {
		if strings.Contains(path, "receipt-key") {
			cuts = append(cuts, mem.CrashClone())
		}
		return false
	}})
	e := newEnv(t, efs)
	efs.ClearFaults()
	cuts = append(cuts, mem.CrashClone())
	if len(cuts) < 4 {
		t.Fatalf("only %d operations on the key file seen", len(cuts))
	}
	e.b.Close()
	e.b = nil
	for i, cut := range cuts {
		c := &env{t: t, fs: cut, clock: newClock()}
		c.open()
		c.createQueue(QueueSettings{Name: "a"})
		c.send("a", "x")
		d := c.receive("a", 1)[0]
		c.crash()
		if err := c.b.Ack(bg, "a", d.Receipt); err != nil {
			t.Errorf("cut %d: ack after a second crash: %v", i, err)
		}
		c.b.Close()
	}
}

func TestReceiptKeyFile(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(Options{Dir: dir, FS: vfs.Default, Logger: quietLogger(), HeadroomBytes: -1, PreallocateBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, n := range []string{receiptKeyFile, backupName(receiptKeyFile)} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", n, fi.Mode().Perm())
		}
	}
}

// A key damaged in both copies is replaced: the broker opens, and receipts
// of the old key are refused as invalid (their messages come back).
func TestReceiptKeyDamagedInBothCopies(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "a"})
	e.send("a", "x")
	d := e.receive("a", 1)[0]
	e.b.Close()
	for _, n := range []string{receiptKeyFile, backupName(receiptKeyFile)} {
		if err := vfs.WriteFileAtomic(e.fs, "/data", n, []byte("{garbage")); err != nil {
			t.Fatal(err)
		}
	}
	e.open()
	if err := e.b.Ack(bg, "a", d.Receipt); !errors.Is(err, ErrReceiptInvalid) {
		t.Fatalf("ack under a replaced key = %v, want ErrReceiptInvalid", err)
	}
	e.restart() // the new key is durable
	e.send("a", "y")
	if err := e.b.Extend(bg, "a", d.Receipt, 0); !errors.Is(err, ErrReceiptInvalid) {
		t.Fatalf("extend = %v", err)
	}
}

func BenchmarkReceiptIssueOpen(b *testing.B) {
	rb := receiptBinding{key: newReceiptKey(make([]byte, receiptKeyLen)), kind: receiptOfQueue, id: 7}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := rb.issue(0, int64(i), uint64(i+1))
		if _, _, err := rb.open(s); err != nil {
			b.Fatal(err)
		}
	}
}

// A redrive's batch held across an upgrade has first-format receipts; they
// are the broker's own, so takeBack binds them instead of having them
// refused (which it would count as moved).
func TestRebindLegacyOnlyRebindsFirstFormat(t *testing.T) {
	rb := receiptBinding{key: newReceiptKey(make([]byte, receiptKeyLen)), kind: receiptOfQueue, id: 3}
	legacy := queue.Receipt{Offset: 5, Token: 9}.String()
	if got, want := rb.rebindLegacy(legacy), rb.issue(0, 5, 9); got != want {
		t.Errorf("rebindLegacy(%q) = %q, want %q", legacy, got, want)
	}
	for _, s := range []string{rb.issue(0, 5, 9), "0:" + legacy, "junk", ""} {
		if got := rb.rebindLegacy(s); got != s {
			t.Errorf("rebindLegacy(%q) = %q, want it unchanged", s, got)
		}
	}
}
