package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/vfs"
)

func failWritesUnder(efs *vfs.ErrorFS, dir string) {
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Count: 1, Match: func(_ vfs.Op, path string) bool {
		return strings.HasPrefix(path, dir)
	}})
}

// TestJournalWriteFailures: a failed journal write fails the operation that
// needed it; the state is rebuilt from disk and the next operation works.
func TestJournalWriteFailures(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnv(t, efs)
	e.createTopic("t", 1)
	e.createSub(SubscriptionSettings{Topic: "t", Name: "s"})
	commit := func(off int64) error {
		errs, err := e.b.CommitOffsets(context.Background(), group.CommitRequest{Group: "g", Generation: -1,
			Offsets: []group.OffsetCommit{{Topic: "t", Partition: 0, Offset: off}}})
		return errors.Join(err, errors.Join(errs...))
	}
	if err := commit(1); err != nil {
		t.Fatal(err)
	}
	failWritesUnder(efs, "/data/groups/journal")
	if err := commit(2); err == nil {
		t.Fatal("commit succeeded though its journal write failed")
	}
	if got, _ := e.b.FetchOffset("g", "t", 0); got.Offset != 1 {
		t.Fatalf("after the failed commit: %d, want the durable 1", got.Offset)
	}
	if err := commit(3); err != nil {
		t.Fatalf("commit after the failure: %v", err)
	}

	e.produce("t", kv("", "a"), kv("", "b"))
	ds := e.subReceive("t", "s", 1)
	failWritesUnder(efs, "/data/topics")
	if err := e.b.SubscriptionAck(context.Background(), "t", "s", ds[0].Receipt); err == nil {
		t.Fatal("ack succeeded though its journal write failed")
	}
	// Reloaded from the journal: the delivery is still in flight, its
	// receipt current; extend and ack work.
	if err := e.b.SubscriptionExtend(context.Background(), "t", "s", ds[0].Receipt, time.Minute); err != nil {
		t.Fatalf("extend after reload: %v", err)
	}
	e.subAck("t", "s", ds[0])
	if next := e.subReceive("t", "s", 10); len(next) != 1 || string(next[0].Value) != "b" {
		t.Fatalf("after reload: %v", values(next))
	}
}

func TestWaitForDataAcrossPartitions(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("w", 2)
	pos := []FetchPosition{{Topic: "w", Partition: 0}, {Topic: "w", Partition: 1}, {Topic: "nope"}}
	got := make(chan bool, 1)
	go func() { got <- e.b.WaitForData(context.Background(), pos, time.Minute) }()
	p := int32(1)
	e.produce("w", ProduceRecord{Value: []byte("x"), Partition: &p})
	if !await(t, got) {
		t.Fatal("WaitForData not woken by a produce to the second partition")
	}
	if e.b.WaitForData(context.Background(), pos[:1], time.Millisecond) {
		t.Fatal("WaitForData reported data in an empty partition")
	}
	if n, err := e.b.PartitionCount("w"); err != nil || n != 2 {
		t.Fatalf("partition count %d %v", n, err)
	}
}
