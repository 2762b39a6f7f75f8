package broker

import (
	"testing"
	"time"
)

// TestDeadLetterTimes: a dead letter reports its original send time and when it was moved
// (DeadLetterInfo.At, the native API's dead_letter_time), and the dead-letter queue's
// retention counts from the move, whether the cursor was offered the copy from the cache
// (just moved) or from the log (after a restart): the cache path counted from the original
// send and dropped a dead letter the log path kept.
func TestDeadLetterTimes(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := map[bool]string{false: "from the cache", true: "from the log, after a restart"}[restart]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.createQueue(QueueSettings{Name: "dlq", Retention: 10 * time.Minute})
			e.createQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq", VisibilityTimeout: time.Minute})
			t0 := e.clock.Now()
			e.send("src", "m")
			e.clock.Advance(6 * time.Minute)
			if got := e.receive("src", 1); len(got) != 1 {
				t.Fatalf("first receive: %d messages", len(got))
			}
			e.clock.Advance(time.Minute) // the lease runs out; the next receive moves it
			moved := e.clock.Now()
			if got := e.receive("src", 1); len(got) != 0 {
				t.Fatal("delivered again instead of dead-lettered")
			}
			if restart {
				e.restart()
			}
			e.clock.Advance(5 * time.Minute) // 12 minutes after the send, 5 after the move
			got := e.receive("dlq", 1)
			if len(got) != 1 {
				t.Fatalf("the dead-letter queue delivers %d messages 5 minutes after the move, want the dead letter (its retention is 10)", len(got))
			}
			d := got[0]
			if !d.SentAt.Equal(t0.Truncate(time.Millisecond)) || d.DeadLetter == nil || !d.DeadLetter.At.Equal(moved.Truncate(time.Millisecond)) {
				t.Errorf("dead letter sent %v, moved %+v; want sent %v, moved %v", d.SentAt, d.DeadLetter, t0, moved)
			}
			e.clock.Advance(6 * time.Minute) // 11 minutes after the move
			if got := e.receive("dlq", 1); len(got) != 0 {
				t.Errorf("the dead letter is still delivered %v after its move, past the queue's retention", e.clock.Now().Sub(moved))
			}
		})
	}
}
