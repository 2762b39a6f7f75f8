package queue

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkReceiveAck measures the bare cursor: offer, receive a batch, ack each, with the
// events built as the broker would journal them (not encoded). One op is one message.
func BenchmarkReceiveAck(b *testing.B) {
	for _, bc := range []struct {
		name  string
		fifo  bool
		batch int
	}{{"standard/batch1", false, 1}, {"standard/batch10", false, 10}, {"fifo/batch10", true, 10}} {
		b.Run(bc.name, func(b *testing.B) {
			c := mustNew(b, Config{FIFO: bc.fifo})
			groups := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"}
			var next int64
			metas := make([]Meta, 0, DefaultLookahead)
			now := t0
			b.ReportAllocs()
			for done := 0; done < b.N; {
				now = now.Add(time.Microsecond)
				metas = metas[:0]
				for range c.Wants() {
					metas = append(metas, Meta{Offset: next, GroupID: groups[next%16], SentAt: now})
					next++
				}
				c.Offer(now, metas)
				ds, _, _ := c.Receive(now, bc.batch, 0)
				for _, d := range ds {
					if _, err := c.Ack(now, d.Receipt); err != nil {
						b.Fatal(err)
					}
				}
				done += len(ds)
			}
		})
	}
}

// BenchmarkEventEncode measures journal encoding of a delivery and its ack.
func BenchmarkEventEncode(b *testing.B) {
	d := Delivered{Offset: 123456789, Token: 987654, Count: 1, At: t0, Deadline: t0.Add(30 * time.Second), FirstAt: t0, SentAt: t0, GroupID: "order-101"}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = d.AppendBinary(buf[:0])
		buf, _ = Acked{Offset: 123456789}.AppendBinary(buf)
	}
}

// BenchmarkCursorSnapshot measures a cursor's Snapshot with n messages in flight (SQS
// allows 120,000 in flight per standard queue): the broker takes it under the queue's lock.
func BenchmarkCursorSnapshot(b *testing.B) {
	for _, n := range []int{10_000, 120_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := mustNew(b, Config{Lookahead: n})
			metas := make([]Meta, n)
			for i := range metas {
				metas[i] = Meta{Offset: int64(i), SentAt: t0}
			}
			c.Offer(t0, metas)
			if ds, _, _ := c.Receive(t0, n, time.Hour); len(ds) != n {
				b.Fatalf("%d received, want %d", len(ds), n)
			}
			b.Run("at-once", func(b *testing.B) {
				for b.Loop() {
					c.Snapshot()
				}
			})
			b.Run("capture", func(b *testing.B) {
				for b.Loop() {
					c.CaptureSnapshot()
				}
			})
		})
	}
}
