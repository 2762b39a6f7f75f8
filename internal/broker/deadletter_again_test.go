package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testrace"
)

// TestDeadLetterTwiceWithinDedupWindow: a message of a FIFO queue that is
// dead-lettered, redriven and dead-lettered again within the dedup window
// must reach the dead-letter queue again, and be redriven again. The copies
// used the message id as their dedup id, so the second copy was dropped as a
// duplicate while the source finished the message: lost.
func TestDeadLetterTwiceWithinDedupWindow(t *testing.T) {
	// A FIFO queue's dead-letter queue is FIFO, so both copies (to the
	// dead-letter queue, and back by redrive) go to FIFO queues.
	for _, dlqName := range []string{"dlq.fifo"} {
		t.Run(dlqName, func(t *testing.T) {
			e := newEnv(t, nil)
			e.createQueue(QueueSettings{Name: dlqName, FIFO: true, ContentBasedDedup: true})
			e.createQueue(QueueSettings{Name: "src.fifo", FIFO: true, ContentBasedDedup: true, MaxReceives: 1, DeadLetterQueue: dlqName})
			if _, err := e.b.Send(context.Background(), "src.fifo", []SendInput{{Body: []byte("poison"), GroupID: "g"}}); err != nil {
				t.Fatal(err)
			}
			for round := 1; round <= 2; round++ {
				if got := e.receive("src.fifo", 1); len(got) != 1 {
					t.Fatalf("round %d: receive from the source got %d messages", round, len(got))
				}
				e.clock.Advance(time.Minute) // visibility runs out, still inside the 5-minute window
				if got := e.receive("src.fifo", 1); len(got) != 0 {
					t.Fatalf("round %d: delivered again instead of dead-lettered", round)
				}
				if st, _ := e.b.QueueStats(dlqName); st.Depth() != 1 {
					t.Fatalf("round %d: dead-letter queue holds %d messages, want the poison message", round, st.Depth())
				}
				task, err := e.b.StartRedrive(RedriveRequest{Source: dlqName})
				if err != nil {
					t.Fatal(err)
				}
				done, err := e.b.WaitRedrive(context.Background(), task.ID)
				if err != nil || done.Status != RedriveCompleted || done.Moved != 1 {
					t.Fatalf("round %d: redrive %+v, %v", round, done, err)
				}
				st, _ := e.b.QueueStats("src.fifo")
				if st.Depth() != 1 {
					t.Fatalf("round %d: after the redrive the source holds %d messages, want the poison message back", round, st.Depth())
				}
			}
			if got := bodies(e.receive("src.fifo", 1)); !slices.Equal(got, []string{"poison"}) {
				t.Fatalf("source delivers %q at the end", got)
			}
		})
	}
}

// TestDeadLetterMoreThanOneBatchHolds: one receive that dead-letters more
// bytes than a queue's log takes in one batch (8 MiB) copies them all. The
// copy was one send, which the log refused, so the queue reloaded and the
// messages came back to fail the same way at every receive. One goroutine copying 12 MiB
// of bodies through a MemFS: 9.5-19 s under -race (the detector instruments every copy),
// 3 s without; its subject is a size limit, not concurrency.
func TestDeadLetterMoreThanOneBatchHolds(t *testing.T) {
	testrace.NotUnderRace(t)
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "dlq"})
	e.createQueue(QueueSettings{Name: "src", MaxReceives: 1, DeadLetterQueue: "dlq"})
	body := make([]byte, 1000<<10)
	in := make([]SendInput, 12)
	for i := range in {
		in[i] = SendInput{Body: body}
	}
	if _, err := e.b.Send(context.Background(), "src", in); err != nil {
		t.Fatal(err)
	}
	if got := e.receive("src", 12); len(got) != 12 {
		t.Fatalf("received %d", len(got))
	}
	e.clock.Advance(time.Hour)
	if got, err := e.b.Receive(context.Background(), "src", ReceiveOptions{Max: 12}); err != nil || len(got) != 0 {
		t.Fatalf("receive that dead-letters: %d messages, %v", len(got), err)
	}
	if st, _ := e.b.QueueStats("dlq"); st.Depth() != 12 {
		t.Fatalf("dead-letter queue holds %d messages, want 12", st.Depth())
	}
	if st, _ := e.b.QueueStats("src"); st.Depth() != 0 {
		t.Fatalf("source still holds %d messages", st.Depth())
	}
}
