package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
)

// Rows go out in id order, in bounded batches, each with its event id and
// headers, and are marked sent only then; the backlog metrics follow.
func TestRelayPublishesInIDOrderAndMarks(t *testing.T) {
	for _, dc := range drivers {
		t.Run(dc.driver, func(t *testing.T) {
			e := newEnv(t, dc, Config{Queue: "emails", Batch: 7})
			if _, err := e.c.CreateQueue(t.Context(), "emails", nil); err != nil {
				t.Fatal(err)
			}
			const n = 30
			var want []string
			for i := range n {
				id := fmt.Sprintf("evt-%02d", i)
				want = append(want, id)
				e.insert(t, e.db, id, "", "body-"+id, `{"type":"order.placed"}`)
			}
			r := e.relay(t)
			if err := r.RefreshStats(t.Context()); err != nil {
				t.Fatal(err)
			}
			if rows, _ := r.Metrics().Backlog(); rows != n {
				t.Fatalf("pending %d before relaying, want %d", rows, n)
			}
			n1, err := r.Step(t.Context())
			if err != nil || n1 != 7 {
				t.Fatalf("first step relayed %d (%v), want the batch of 7", n1, err)
			}
			if got := unsent(t, e.db); got != n-7 {
				t.Fatalf("%d unsent after one step, want %d", got, n-7)
			}
			if got := drain(t, r) + n1; got != n {
				t.Fatalf("relayed %d rows, want %d", got, n)
			}
			msgs, err := e.c.Receive(t.Context(), "emails", client.MaxMessages(1))
			if err != nil || len(msgs) != 1 {
				t.Fatalf("receive: %d %v", len(msgs), err)
			}
			m := msgs[0]
			if inbox.EventID(m) != "evt-00" || string(m.GetBody()) != "body-evt-00" || string(m.GetAttributes()["type"].GetValue()) != "order.placed" {
				t.Fatalf("first message: event id %q body %q attributes %v", inbox.EventID(m), m.GetBody(), m.GetAttributes())
			}
			if err := e.c.Ack(t.Context(), "emails", m.GetReceipt()); err != nil {
				t.Fatal(err)
			}
			got := append([]string{"evt-00"}, receiveAll(t, e.c, "emails", n-1)...)
			if !slices.Equal(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if unsent(t, e.db) != 0 || r.Metrics().Published() != n {
				t.Fatalf("unsent %d, published metric %d", unsent(t, e.db), r.Metrics().Published())
			}
			if err := r.RefreshStats(t.Context()); err != nil {
				t.Fatal(err)
			}
			if rows, age := r.Metrics().Backlog(); rows != 0 || age != 0 {
				t.Fatalf("backlog after relaying: %d rows, oldest %v s", rows, age)
			}
		})
	}
}

// Ids commit out of order: the row with the smaller id becomes visible
// after the larger one was relayed, and is relayed too. A relay that kept
// "the highest id seen" as its position would skip it for ever.
func TestRelayOutOfOrderCommit(t *testing.T) {
	for _, dc := range drivers {
		if dc.driver == "sqlite" {
			continue // one writer at a time: ids commit in order
		}
		t.Run(dc.driver, func(t *testing.T) {
			e := newEnv(t, dc, Config{Queue: "q"})
			if _, err := e.c.CreateQueue(t.Context(), "q", nil); err != nil {
				t.Fatal(err)
			}
			slow, err := e.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Rollback()
			e.insert(t, slow, "evt-small", "", "first id", "")
			e.insert(t, e.db, "evt-large", "", "second id, committed first", "")
			r := e.relay(t)
			if n := drain(t, r); n != 1 {
				t.Fatalf("relayed %d with one row committed, want 1", n)
			}
			if err := slow.Commit(); err != nil {
				t.Fatal(err)
			}
			if n := drain(t, r); n != 1 {
				t.Fatalf("relayed %d after the smaller id committed, want 1", n)
			}
			got := receiveAll(t, e.c, "q", 2)
			if !slices.Equal(got, []string{"evt-large", "evt-small"}) {
				t.Fatalf("delivered %v, want both, the larger id first", got)
			}
			var small, large int64
			if err := e.db.QueryRowContext(t.Context(), "SELECT (SELECT id FROM outbox WHERE event_id = 'evt-small'), (SELECT id FROM outbox WHERE event_id = 'evt-large')").Scan(&small, &large); err != nil {
				t.Fatal(err)
			}
			if small >= large {
				t.Fatalf("ids %d, %d: the test did not commit out of order", small, large)
			}
		})
	}
}

// failingMark publishes, then fails as a relay crashing before its mark
// would: the rows stay unsent and the next step publishes them again.
type failingMark struct {
	Publisher
	fail bool
}

var errCrash = errors.New("relay crashed after the broker's ack")

func (p *failingMark) Publish(ctx context.Context, evs []Event) error {
	if err := p.Publisher.Publish(ctx, evs); err != nil {
		return err
	}
	if p.fail {
		p.fail = false
		return errCrash
	}
	return nil
}

// A crash between publish and mark republishes; on a FIFO queue the event
// id is the deduplication id, so the broker drops the repeat itself.
func TestRelayRepublishDedupedOnFIFO(t *testing.T) {
	dc := drivers[0]
	e := newEnv(t, dc, Config{Queue: "orders.fifo", OnSent: "delete"})
	if _, err := e.c.CreateQueue(t.Context(), "orders.fifo", &client.QueueConfig{Fifo: true}); err != nil {
		t.Fatal(err)
	}
	e.insert(t, e.db, "evt-a", "order-101", "a", "")
	e.insert(t, e.db, "evt-b", "", "b", "") // no key: the default group
	pub, err := NewPublisher(t.Context(), e.c, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	fm := &failingMark{Publisher: pub, fail: true}
	r, err := NewRelay(e.cfg, e.db, fm, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Step(t.Context()); !errors.Is(err, errCrash) {
		t.Fatalf("step: %v, want the injected crash", err)
	}
	if rows(t, e.db) != 2 {
		t.Fatal("rows deleted although the mark never happened")
	}
	if n := drain(t, r); n != 2 {
		t.Fatalf("relayed %d after the crash, want both again", n)
	}
	if rows(t, e.db) != 0 {
		t.Fatal("on_sent: delete left rows behind")
	}
	msgs, err := e.c.Receive(t.Context(), "orders.fifo", client.MaxMessages(10), client.Wait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, inbox.EventID(m)+"/"+m.GetGroupId()+"/"+m.GetDeduplicationId())
	}
	slices.Sort(got)
	want := []string{"evt-a/order-101/evt-a", "evt-b/outbox/evt-b"}
	if !slices.Equal(got, want) {
		t.Fatalf("queue holds %v, want %v (one copy each)", got, want)
	}
}

// A topic destination: the key orders by partition, the event id and the
// headers column are record headers.
func TestRelayToTopic(t *testing.T) {
	dc := drivers[0]
	e := newEnv(t, dc, Config{Topic: "orders"})
	if _, err := e.c.CreateTopic(t.Context(), "orders", &client.TopicConfig{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	e.insert(t, e.db, "evt-a", "101", `{"points":10}`, `{"type":"order.placed"}`)
	if n := drain(t, e.relay(t)); n != 1 {
		t.Fatalf("relayed %d", n)
	}
	res, err := e.c.Fetch(t.Context(), &client.FetchRequest{Topic: "orders", Partitions: []*client.PartitionOffset{{Partition: 0, Offset: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*client.Record
	for _, p := range res.GetPartitions() {
		recs = append(recs, p.GetRecords()...)
	}
	if len(recs) != 1 {
		t.Fatalf("fetched %d records", len(recs))
	}
	r := recs[0]
	if string(r.GetKey()) != "101" || inbox.RecordEventID(r) != "evt-a" || len(r.GetHeaders()) != 2 || r.GetHeaders()[1].GetKey() != "type" {
		t.Fatalf("record key %q event id %q headers %v", r.GetKey(), inbox.RecordEventID(r), r.GetHeaders())
	}
}

// Two relays on one table at once (active/active with SKIP LOCKED): no row
// is lost, and none is sent twice (the rows one holds, the other skips).
func TestTwoRelaysShareTheTable(t *testing.T) {
	for _, dc := range drivers[:2] {
		t.Run(dc.driver, func(t *testing.T) {
			e := newEnv(t, dc, Config{Queue: "q", Batch: 10, Interval: time.Millisecond})
			if _, err := e.c.CreateQueue(t.Context(), "q", nil); err != nil {
				t.Fatal(err)
			}
			const n = 300
			for i := range n {
				e.insert(t, e.db, fmt.Sprintf("evt-%03d", i), "", "x", "")
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			relays := []*Relay{e.relay(t), e.relay(t)}
			for _, r := range relays {
				wg.Go(func() { _ = r.Run(ctx) })
			}
			got := receiveAll(t, e.c, "q", n)
			cancel()
			wg.Wait()
			seen := map[string]int{}
			for _, id := range got {
				seen[id]++
			}
			if len(seen) != n || len(got) != n {
				t.Fatalf("%d distinct of %d delivered, want %d once each", len(seen), len(got), n)
			}
			if p0, p1 := relays[0].Metrics().Published(), relays[1].Metrics().Published(); p0+p1 != n || p0 == 0 || p1 == 0 {
				t.Logf("relays published %d and %d (both should usually share)", p0, p1)
			}
		})
	}
}

// A row the relay cannot send (headers not a JSON object of strings)
// stops it with an error naming the row; nothing after it is skipped past.
func TestRelayStopsAtBadRow(t *testing.T) {
	dc := drivers[2]
	e := newEnv(t, dc, Config{Queue: "q"})
	if _, err := e.c.CreateQueue(t.Context(), "q", nil); err != nil {
		t.Fatal(err)
	}
	e.insert(t, e.db, "evt-bad", "", "x", `{"n": 1}`)
	e.insert(t, e.db, "evt-good", "", "x", "")
	_, err := e.relay(t).Step(t.Context())
	if err == nil || !strings.Contains(err.Error(), `"evt-bad"`) {
		t.Fatalf("step: %v, want an error naming evt-bad", err)
	}
	if unsent(t, e.db) != 2 {
		t.Fatal("a row was marked although the batch failed")
	}
}

func TestConfigNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string // "" = valid
	}{
		{"defaults", Config{Driver: "postgres", DSN: "x", Queue: "q"}, ""},
		{"no destination", Config{Driver: "postgres", DSN: "x"}, "exactly one"},
		{"both destinations", Config{Driver: "postgres", DSN: "x", Queue: "q", Topic: "t"}, "exactly one"},
		{"unknown driver", Config{Driver: "oracle", DSN: "x", Queue: "q"}, "driver"},
		{"cdc on mysql", Config{Driver: "mysql", DSN: "x", Queue: "q", Mode: "cdc"}, "cdc is for driver postgres"},
		{"table with SQL", Config{Driver: "sqlite", DSN: "x", Queue: "q", Table: "o; DROP TABLE x"}, "identifier"},
		{"batch too big", Config{Driver: "sqlite", DSN: "x", Queue: "q", Batch: 5000}, "batch"},
		{"on_sent", Config{Driver: "sqlite", DSN: "x", Queue: "q", OnSent: "archive"}, "on_sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Normalize()
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Normalize: %v, want %q", err, tc.err)
			}
		})
	}
}

func TestMetricsText(t *testing.T) {
	m := newMetrics("outbox", "queue:q")
	m.published.Add(3)
	m.setBacklog(2, 31.5)
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`sluice_outbox_oldest_unsent_age_seconds{table="outbox",destination="queue:q"} 31.5`,
		`sluice_outbox_rows_pending{table="outbox",destination="queue:q"} 2`,
		`sluice_outbox_published_total{table="outbox",destination="queue:q"} 3`,
		"# TYPE sluice_outbox_errors_total counter",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "slot_lag") {
		t.Error("polling relay exports a CDC slot lag")
	}
}

// blockingPublisher holds every publish until release is closed.
type blockingPublisher struct {
	Publisher
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (p *blockingPublisher) Publish(ctx context.Context, evs []Event) error {
	p.once.Do(func() { close(p.entered) })
	<-p.release
	return p.Publisher.Publish(ctx, evs)
}

// While a relay holds its claimed rows across the broker round trip, the
// application's inserts into the outbox do not wait for it: on InnoDB the
// claim runs at READ COMMITTED, so it takes no gap lock in front of new ids.
func TestClaimDoesNotBlockInserts(t *testing.T) {
	for _, dc := range drivers[:2] {
		t.Run(dc.driver, func(t *testing.T) {
			e := newEnv(t, dc, Config{Queue: "q"})
			if _, err := e.c.CreateQueue(t.Context(), "q", nil); err != nil {
				t.Fatal(err)
			}
			e.insert(t, e.db, "evt-1", "", "x", "")
			pub, err := NewPublisher(t.Context(), e.c, e.cfg)
			if err != nil {
				t.Fatal(err)
			}
			bp := &blockingPublisher{Publisher: pub, entered: make(chan struct{}), release: make(chan struct{})}
			r, err := NewRelay(e.cfg, e.db, bp, nil)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, err := r.Step(t.Context()); done <- err }()
			<-bp.entered
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			start := time.Now()
			_, err = e.db.ExecContext(ctx, dc.insert, "evt-2", nil, []byte("y"), nil)
			close(bp.release)
			if err != nil {
				t.Fatalf("insert while the relay held its claim: %v after %s", err, time.Since(start))
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := drain(t, r); got != 1 {
				t.Fatalf("relayed %d after the held step, want evt-2", got)
			}
		})
	}
}

// downPublisher is a broker that refuses everything.
type downPublisher struct{}

func (downPublisher) Publish(context.Context, []Event) error { return errors.New("broker down") }

// While the broker is down the backlog metrics keep moving: the oldest
// unsent row's age is what the 30 s alert watches, so it must grow during
// exactly the outage it is for.
func TestBacklogMetricsDuringBrokerOutage(t *testing.T) {
	dc := drivers[0]
	e := newEnv(t, dc, Config{Queue: "q"})
	if _, err := e.db.ExecContext(t.Context(), `INSERT INTO outbox (event_id, payload, created_at) VALUES ('evt-old', 'x', now() - interval '90 seconds')`); err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(e.cfg, e.db, downPublisher{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	defer stop()
	waitFor(t, "the backlog metrics during the outage", func() bool {
		rows, age := r.Metrics().Backlog()
		return rows == 1 && age >= 90
	})
	if r.Metrics().Errors() == 0 {
		t.Fatal("failed steps not counted")
	}
}

// Two relays with lock: wait (active and hot standby): each claim waits
// for the rows the other holds, so the queue still gets every row once, in
// id order.
func TestStandbyWaitKeepsOrder(t *testing.T) {
	for _, dc := range drivers[:2] {
		t.Run(dc.driver, func(t *testing.T) {
			e := newEnv(t, dc, Config{Queue: "q", Batch: 10, Interval: time.Millisecond, Lock: "wait"})
			if _, err := e.c.CreateQueue(t.Context(), "q", nil); err != nil {
				t.Fatal(err)
			}
			const n = 200
			var want []string
			for i := range n {
				id := fmt.Sprintf("evt-%03d", i)
				want = append(want, id)
				e.insert(t, e.db, id, "", "x", "")
			}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			relays := []*Relay{e.relay(t), e.relay(t)}
			for _, r := range relays {
				wg.Go(func() { _ = r.Run(ctx) })
			}
			got := receiveAll(t, e.c, "q", n)
			cancel()
			wg.Wait()
			if !slices.Equal(got, want) {
				t.Fatalf("delivered %d messages, not the %d rows in id order:\n%v", len(got), n, got)
			}
			t.Logf("relays published %d and %d", relays[0].Metrics().Published(), relays[1].Metrics().Published())
		})
	}
}
