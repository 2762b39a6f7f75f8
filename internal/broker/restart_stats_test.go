package broker

import (
	"context"
	"testing"
	"time"
)

// Stats after a restart equal stats before (but for StaleRefused, which
// counts since the start): sent and acked are rebuilt from the log and the
// journal, a delayed message is not counted visible before the first
// receive, and the oldest message's age leaves delayed messages out.
func TestRestartKeepsStats(t *testing.T) {
	for _, how := range []string{"restart", "crash"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, nil)
			e.createQueue(QueueSettings{Name: "q"})
			e.send("q", "a")
			if _, err := e.b.Send(context.Background(), "q", []SendInput{{Body: []byte("late"), Delay: time.Hour}}); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Minute)
			e.send("q", "b", "c")
			ds := e.receive("q", 2) // a and b
			if err := e.b.Ack(context.Background(), "q", ds[0].Receipt); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(10 * time.Second)
			before, _ := e.b.QueueStats("q")
			// Oldest: b, sent 10 s ago; "late" is older but delayed.
			want := QueueStats{Name: "q", Visible: 1, InFlight: 1, Delayed: 1, OldestAge: 10 * time.Second,
				Sent: 4, Received: 2, Acked: 1}
			if before != want {
				t.Fatalf("before:\n got %+v\nwant %+v", before, want)
			}
			if how == "crash" {
				e.crash()
			} else {
				e.restart()
			}
			if after, _ := e.b.QueueStats("q"); after != before {
				t.Fatalf("after %s:\n got %+v\nwant %+v", how, after, before)
			}
		})
	}
}
