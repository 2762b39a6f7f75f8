package replcursor

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/wire"
)

var errBad = errors.New("bad")

// TestResults: a result is handed only to the request that proposed its entry, once; the
// oldest are dropped past MaxResults; Reset forgets them all.
func TestResults(t *testing.T) {
	var r Results[string]
	r.Keep(3, 7, "x")
	if _, ok := r.Take(3, 6); ok {
		t.Fatal("handed to the wrong request")
	}
	if v, ok := r.Take(3, 7); !ok || v != "x" {
		t.Fatalf("Take = %q %v", v, ok)
	}
	if _, ok := r.Take(3, 7); ok {
		t.Fatal("handed twice")
	}
	for i := uint64(1); i <= MaxResults+1; i++ {
		r.Keep(i, i, "")
	}
	if n := r.Len(); n > MaxResults {
		t.Fatalf("%d kept, want at most %d", n, MaxResults)
	}
	if _, ok := r.Take(MaxResults+1, MaxResults+1); !ok {
		t.Fatal("the newest was dropped")
	}
	r.Reset()
	if r.Len() != 0 {
		t.Fatal("Reset kept results")
	}
}

// TestClock: the group's time never goes back; a stamp is never before it.
func TestClock(t *testing.T) {
	var c Clock
	t0 := time.Unix(100, 0)
	if got := c.Advance(t0); !got.Equal(t0) {
		t.Fatalf("Advance = %v", got)
	}
	if got := c.Advance(t0.Add(-time.Minute)); !got.Equal(t0) {
		t.Fatalf("a clock behind moved the time back to %v", got)
	}
	if got := Stamp(func() time.Time { return t0.Add(-time.Hour) }, c.Now()); !got.Equal(t0) {
		t.Fatalf("Stamp = %v, want the last applied time", got)
	}
}

// TestOpRoundTrip: every op Check accepts decodes as encoded; Run applies them to a cursor.
func TestOpRoundTrip(t *testing.T) {
	cur, err := queue.New(queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	cur.Offer(now, []queue.Meta{{Offset: 0, SentAt: now}})
	ds, _, err := Run(cur, now, Op{Kind: Receive, Max: 1})
	if err != nil || len(ds) != 1 {
		t.Fatalf("Run(Receive) = %v %v", ds, err)
	}
	for _, o := range []Op{{Kind: Receive, Max: 3, Timeout: time.Second}, {Kind: Extend, Receipt: ds[0].Receipt, Timeout: time.Second},
		{Kind: Nack, Receipt: ds[0].Receipt, Delay: 0}, {Kind: Ack, Receipt: "nope"}} {
		if !o.Check() {
			t.Fatalf("Check refused %+v", o)
		}
		d := wire.Decoder{B: o.Append(nil), Bad: errBad}
		got := Read(&d, o.Kind)
		if d.Done(); d.Err != nil || got != o {
			t.Fatalf("round trip of %+v: %+v, %v", o, got, d.Err)
		}
	}
	if _, _, err := Run(cur, now, Op{Kind: Nack, Receipt: ds[0].Receipt}); err != nil {
		t.Fatal(err)
	}
	again, _, err := Run(cur, now, Op{Kind: Receive, Max: 1})
	if err != nil || len(again) != 1 || again[0].ReceiveCount != 2 {
		t.Fatalf("receive after the nack: %+v %v", again, err)
	}
	if _, _, err := Run(cur, now, Op{Kind: Ack, Receipt: ds[0].Receipt}); !errors.Is(err, queue.ErrReceiptStale) {
		t.Fatalf("ack of the first delivery after the second: %v, want stale", err)
	}
	for _, o := range []Op{{Kind: Receive}, {Kind: Receive, Max: MaxReceive + 1}, {Kind: Ack, Receipt: string(make([]byte, MaxReceipt+1))},
		{Kind: Nack, Delay: -1}, {Kind: 9}} {
		if o.Check() {
			t.Fatalf("Check accepted %+v", o)
		}
	}
}
