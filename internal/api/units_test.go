package api

import (
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
