package api

import (
	"net/http/httptest"
	"reflect"
	"testing"
	"time"
)

func TestPageWalksNamesAfterTheToken(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	var got []string
	token := ""
	for {
		p, next, err := page(names, 2, token)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p...)
		if next == "" {
			break
		}
		token = next
	}
	if !reflect.DeepEqual(got, names) {
		t.Errorf("pages joined = %v", got)
	}
	// A token whose name was deleted meanwhile still resumes after it.
	if p, _, _ := page([]string{"a", "c"}, 10, "b"); !reflect.DeepEqual(p, []string{"c"}) {
		t.Errorf("resume after a deleted name = %v", p)
	}
	if _, _, err := page(names, 1001, ""); err == nil {
		t.Error("page size 1001 accepted")
	}
}

// The leases behind Consume's max_in_flight: an ack or nack frees a slot at
// once and wakes the stream, an expired lease stops counting, an extension
// keeps it counting.
func TestLeasesCountOutstandingDeliveries(t *testing.T) {
	l := newLeases()
	s := l.open()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l.add(s, "q", "r1", now.Add(time.Second))
	l.add(s, "q", "r2", now.Add(time.Second))
	l.add(s, "q", "r3", now.Add(time.Second))
	if n, next := l.outstanding(s, now); n != 3 || !next.Equal(now.Add(time.Second)) {
		t.Fatalf("outstanding = %d, %v", n, next)
	}
	l.release("q", "r1")
	select {
	case <-s.changed:
	default:
		t.Error("a release did not wake the stream")
	}
	l.release("other", "r2") // another queue's receipt is not ours
	l.extend("q", "r2", now.Add(time.Minute))
	if n, next := l.outstanding(s, now.Add(2*time.Second)); n != 1 || !next.Equal(now.Add(time.Minute)) {
		t.Errorf("after an ack, an extension and an expiry: %d, %v; want 1 until the extended deadline", n, next)
	}
	l.close(s)
	if len(l.byKey) != 0 {
		t.Errorf("closed stream left %d leases behind", len(l.byKey))
	}
}

// An ack on the Consume stream frees its slots before it is durable
// (ackStaged); if the write then fails, restore gives them back so the
// stream still holds no more than max_in_flight, and a stream that ended
// meanwhile gets nothing back.
func TestLeasesTakenComeBackAfterAFailedWrite(t *testing.T) {
	l := newLeases()
	s := l.open()
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	l.add(s, "q", "r1", now.Add(time.Minute))
	l.add(s, "q", "r2", now.Add(2*time.Minute))
	var taken []heldLease
	l.take("q", "r1", &taken)
	l.take("q", "r2", &taken)
	l.take("q", "gone", &taken) // not held: nothing to give back
	if n, _ := l.outstanding(s, now); n != 0 || len(taken) != 2 {
		t.Fatalf("after take: %d outstanding, %d taken", n, len(taken))
	}
	l.restore(taken)
	if n, next := l.outstanding(s, now); n != 2 || !next.Equal(now.Add(time.Minute)) {
		t.Fatalf("after restore: %d outstanding until %v; want 2 with their deadlines", n, next)
	}
	taken = taken[:0]
	l.take("q", "r1", &taken)
	l.close(s)
	l.restore(taken)
	if len(l.byKey) != 0 || len(s.held) != 0 {
		t.Errorf("restore into a closed stream left %d, %d leases", len(l.byKey), len(s.held))
	}
}

// corkWriter passes flushes through unless corked, and owes exactly one
// flush for everything written while corked.
func TestCorkWriterFlushesOncePerRun(t *testing.T) {
	rec := &countingFlusher{ResponseRecorder: httptest.NewRecorder()}
	c := &corkWriter{ResponseWriter: rec}
	c.Flush()
	if rec.flushes != 1 {
		t.Fatalf("uncorked flush: %d", rec.flushes)
	}
	c.cork()
	for range 5 {
		c.Write([]byte("x"))
		c.Flush()
	}
	if rec.flushes != 1 {
		t.Fatalf("corked flushes went through: %d", rec.flushes)
	}
	c.uncork()
	if rec.flushes != 2 || rec.Body.String() != "xxxxx" {
		t.Fatalf("uncork: %d flushes, body %q", rec.flushes, rec.Body.String())
	}
	c.cork()
	c.uncork() // nothing written, nothing owed
	if rec.flushes != 2 {
		t.Errorf("an empty run flushed: %d", rec.flushes)
	}
	var nilCork *corkWriter // a route without one
	nilCork.cork()
	nilCork.uncork()
}

type countingFlusher struct {
	*httptest.ResponseRecorder
	flushes int
}

func (c *countingFlusher) Flush() { c.flushes++; c.ResponseRecorder.Flush() }
