package queue

import (
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"
	"time"
)

// sampleEvents has one event of every kind, with awkward values (zero times, empty and
// non-ASCII strings, large offsets).
func sampleEvents() []Event {
	return []Event{
		Delivered{Offset: 7, Token: 42, Count: 3, At: at(10), Deadline: at(40), FirstAt: at(0), SentAt: at(-5), GroupID: "g"},
		Delivered{Offset: 1 << 62, Token: 1, Count: 1, At: at(1), Deadline: at(2), FirstAt: at(1)},
		Acked{Offset: 0},
		Extended{Offset: 9, Deadline: at(3600)},
		Nacked{Offset: 3, AvailableAt: at(90), Reason: "payload ✗ invalid"},
		Nacked{Offset: 4},
		DeadLettered{Offset: 5, Count: 3, FirstAt: at(0), LastAt: at(60), SentAt: at(0), GroupID: "order-101", Reason: "corrupt"},
		Expired{From: 10, To: 20},
		Skipped{From: 0, To: 1},
		Purged{UpTo: 1000},
	}
}

func TestEventRoundTrip(t *testing.T) {
	for _, ev := range sampleEvents() {
		b, err := ev.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalEvent(b)
		if err != nil || !reflect.DeepEqual(got, ev) {
			t.Errorf("%#v: decoded %#v, %v", ev, got, err)
		}
		for i := range b { // every strict prefix is refused, never misread
			if _, err := UnmarshalEvent(b[:i]); err == nil {
				t.Errorf("%#v: prefix of %d bytes accepted", ev, i)
			}
		}
		if _, err := UnmarshalEvent(append(b, 0)); err == nil {
			t.Errorf("%#v: trailing byte accepted", ev)
		}
	}
	if _, err := (Expired{From: 5, To: 4}).MarshalBinary(); err == nil {
		t.Error("reversed range encoded")
	}
}

func FuzzUnmarshalEvent(f *testing.F) {
	for _, ev := range sampleEvents() {
		b, _ := ev.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := UnmarshalEvent(b)
		if err != nil {
			return
		}
		again, err := ev.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", ev, err)
		}
		ev2, err := UnmarshalEvent(again)
		if err != nil || !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("%#v re-decodes as %#v, %v", ev, ev2, err)
		}
		// Any decoded event applied to a cursor with some state must not panic; an event
		// that does not fit is refused.
		c := fuzzCursor(t)
		_ = c.Apply(ev)
		c.Stats(at(100))
		c.Receive(at(100), 10, 0)
	})
}

// fuzzCursor has a few messages in each state for decoded events to land on.
func fuzzCursor(t *testing.T) *Cursor {
	c := mustNew(t, Config{FIFO: true, MaxReceives: 2})
	var metas []Meta
	for i := range int64(8) {
		metas = append(metas, Meta{Offset: i * 2, GroupID: string(rune('a' + i%3)), SentAt: at(0)})
	}
	c.Offer(at(0), metas)
	ds, _, _ := c.Receive(at(0), 2, 0)
	c.Nack(at(1), ds[0].Receipt, time.Second, "x")
	return c
}

func FuzzParseReceipt(f *testing.F) {
	f.Add(Receipt{Offset: 0, Token: 1}.String())
	f.Add(Receipt{Offset: 1 << 40, Token: 1 << 50}.String())
	f.Add("")
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReceipt(s)
		if err != nil {
			return
		}
		if r.String() != s {
			t.Fatalf("%q parses as %+v which prints as %q", s, r, r.String())
		}
	})
}

func FuzzRestore(f *testing.F) {
	f.Add(fuzzCursor(&testing.T{}).Snapshot())
	f.Add(mustNew(f, Config{}).Snapshot())
	f.Fuzz(func(t *testing.T, b []byte) {
		// Also read the input as a snapshot body with a valid header and checksum, so the
		// fuzzer exercises the parser rather than the checksum.
		body := append(append([]byte(nil), snapMagic[:]...), b...)
		sealed := binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
		for i, fifo := range []bool{false, true, false, true} {
			in := b
			if i >= 2 {
				in = sealed
			}
			c, err := Restore(Config{FIFO: fifo}, in)
			if err != nil {
				continue
			}
			snap := c.Snapshot()
			c2, err := Restore(Config{FIFO: fifo}, snap)
			if err != nil || string(c2.Snapshot()) != string(snap) {
				t.Fatalf("restored snapshot does not round-trip: %v", err)
			}
			c.Receive(at(100), 10, 0)
		}
	})
}

func TestSnapshotCorruption(t *testing.T) {
	snap := fuzzCursor(t).Snapshot()
	for i := range snap {
		b := append([]byte(nil), snap...)
		b[i] ^= 0x40
		if _, err := Restore(Config{FIFO: true}, b); err == nil {
			t.Errorf("flipped byte %d accepted", i)
		}
	}
	if _, err := Restore(Config{}, snap[:len(snap)-1]); err == nil {
		t.Error("truncated snapshot accepted")
	}
	if _, err := Restore(Config{Visibility: -1}, snap); err == nil {
		t.Error("bad config accepted")
	}
}
