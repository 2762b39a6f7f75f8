package inbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
	"github.com/sluice-mq/sluice/sluicetest"
)

var errCrash = errors.New("consumer crashes before committing")

// The seed's log scenario on a real topic and consumer group: the relay
// published evt-b twice (offsets 1 and 3); the loyalty consumer applies
// each record with the inbox, commits the group's offset after each batch
// of three, and crashes after offset 4, before its commit. Restarted from
// the committed offset, it meets evt-b and evt-d again and skips both.
func TestSeedLogConsumerWithInbox(t *testing.T) {
	for _, c := range consumerDBs {
		t.Run(c.name, func(t *testing.T) {
			cl, _ := sluicetest.New(t)
			ctx := t.Context()
			if _, err := cl.CreateTopic(ctx, "orders", &client.TopicConfig{Partitions: 1}); err != nil {
				t.Fatal(err)
			}
			var recs []*client.ProduceRecord
			for _, r := range []struct {
				event     string
				order, pt int
			}{{"evt-a", 101, 10}, {"evt-b", 102, 5}, {"evt-c", 103, 20}, {"evt-b", 102, 5}, {"evt-d", 104, 8}, {"evt-e", 105, 12}} {
				recs = append(recs, &client.ProduceRecord{
					Key:     fmt.Appendf(nil, "%d", r.order),
					Value:   fmt.Appendf(nil, `{"order_id":%d,"points":%d}`, r.order, r.pt),
					Headers: []*client.Header{{Key: inbox.EventIDKey, Value: []byte(r.event)}},
				})
			}
			if _, err := cl.Produce(ctx, "orders", recs, nil); err != nil {
				t.Fatal(err)
			}
			db := c.open(t)
			in := newInbox(t, db, c.dialect)
			var log []string
			member := "" // a restarted consumer rejoins under its member id
			consume := func(crashAfter int64) error {
				return consumeGroup(ctx, cl, in, c, &log, &member, crashAfter)
			}
			if err := consume(4); !errors.Is(err, errCrash) {
				t.Fatalf("first run: %v, want the crash", err)
			}
			if err := consume(-1); err != nil {
				t.Fatal(err)
			}
			want := []string{"0 evt-a applied", "1 evt-b applied", "2 evt-c applied", "commit 3",
				"3 evt-b skipped", "4 evt-d applied", "crash",
				"3 evt-b skipped", "4 evt-d skipped", "5 evt-e applied", "commit 6"}
			if fmt.Sprint(log) != fmt.Sprint(want) {
				t.Fatalf("log\n%v\nwant\n%v", log, want)
			}
			if got := points(t, db); got != "101=10 102=5 103=20 104=8 105=12" {
				t.Fatalf("points %q", got)
			}
			if n := count(t, db, "inbox"); n != 5 {
				t.Fatalf("events applied %d, want 5", n)
			}
		})
	}
}

// consumeGroup is one run of the loyalty consumer: join the group, read
// from its committed offset in batches of three, one inbox transaction per
// record, and commit the offset after each whole batch.
func consumeGroup(ctx context.Context, c *client.Client, in *inbox.Inbox, db consumerDB, log *[]string, member *string, crashAfter int64) error {
	j, err := c.JoinGroup(ctx, &client.JoinGroupRequest{Group: "loyalty", Topics: []string{"orders"}, MemberId: *member})
	if err != nil {
		return err
	}
	*member = j.GetMemberId()
	committed, err := c.FetchOffsets(ctx, "loyalty", []*client.TopicPartitions{{Topic: "orders", Partitions: []int32{0}}})
	if err != nil {
		return err
	}
	pos := max(committed[0].GetOffset(), 0)
	for {
		res, err := c.Fetch(ctx, &client.FetchRequest{Topic: "orders", Partitions: []*client.PartitionOffset{{Partition: 0, Offset: pos}}, MaxRecords: 3})
		if err != nil {
			return err
		}
		batch := res.GetPartitions()[0].GetRecords()
		if len(batch) == 0 {
			return c.LeaveGroup(ctx, "loyalty", j.GetMemberId())
		}
		for _, r := range batch {
			var ev struct {
				OrderID int `json:"order_id"`
				Points  int `json:"points"`
			}
			if err := json.Unmarshal(r.GetValue(), &ev); err != nil {
				return err
			}
			applied, err := in.Apply(ctx, inbox.RecordEventID(r), db.addPoints(ev.OrderID, ev.Points))
			if err != nil {
				return err
			}
			result := "skipped"
			if applied {
				result = "applied"
			}
			*log = append(*log, fmt.Sprintf("%d %s %s", r.GetOffset(), inbox.RecordEventID(r), result))
			if r.GetOffset() == crashAfter {
				*log = append(*log, "crash")
				return errCrash // no leave, no commit: a process that died
			}
		}
		pos = batch[len(batch)-1].GetOffset() + 1
		// At least once: the offset moves only after the batch took effect.
		if err := c.CommitOffsets(ctx, "loyalty", j.GetMemberId(), j.GetGeneration(),
			[]*client.CommittedOffset{{Topic: "orders", Partition: 0, Offset: pos}}); err != nil {
			return err
		}
		*log = append(*log, fmt.Sprintf("commit %d", pos))
	}
}

// A topic subscription delivers record headers as attributes, so the
// worker's inbox handler dedupes a republished record by its event id.
func TestSubscriptionWorkerWithInbox(t *testing.T) {
	c := consumerDBs[2] // the database does not matter here: SQLite is quickest
	cl, _ := sluicetest.New(t)
	ctx := t.Context()
	if _, err := cl.CreateTopic(ctx, "orders", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSubscription(ctx, "orders", "loyalty", &client.SubscriptionConfig{FromEarliest: true}); err != nil {
		t.Fatal(err)
	}
	var recs []*client.ProduceRecord
	for _, ev := range []string{"evt-a", "evt-b", "evt-a"} { // evt-a republished
		recs = append(recs, &client.ProduceRecord{Value: []byte(`{"order_id":101,"points":10}`),
			Headers: []*client.Header{{Key: inbox.EventIDKey, Value: []byte(ev)}}})
	}
	if _, err := cl.Produce(ctx, "orders", recs, nil); err != nil {
		t.Fatal(err)
	}
	db := c.open(t)
	in := newInbox(t, db, c.dialect)
	wctx, stop := context.WithCancel(ctx)
	w := cl.NewWorker("orders/loyalty", in.Handler(func(ctx context.Context, tx *sql.Tx, m *client.Message) error {
		return c.addPoints(101, 10)(ctx, tx)
	}), client.OnError(func(m *client.Message, err error) { t.Errorf("handler: %v", err) }))
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	// All three deliveries acked, the repeat too (skipped, not failed).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s, err := cl.GetSubscription(ctx, "orders", "loyalty")
		if err == nil && s.GetStats().GetAckedTotal() == 3 {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := points(t, db); got != "101=20" {
		t.Fatalf("points %q, want 101=20 (evt-a and evt-b once each)", got)
	}
}
