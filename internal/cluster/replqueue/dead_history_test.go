package replqueue

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/internal/queue"
)

// TestDeadLetterHistory: a dead letter waiting for its copy says when the message was sent
// and first received, when the receive that moved it ran, and why its last nack said it
// failed (OpNackReason; a plain OpNack since says nothing, as the cursor keeps the last
// reason given). The reason is cut to queue.MaxReasonLen.
func TestDeadLetterHistory(t *testing.T) {
	m, _ := NewMachine(1, queue.Config{Visibility: time.Minute, MaxExtension: time.Hour, Retention: 24 * time.Hour})
	run(t, m, Command{Op: OpSend, Now: t0, Body: []byte("m")})
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	first := run(t, m, Command{Op: OpReceiveLimited, Now: at(1), Max: 1, MaxReceives: 2})
	if len(first.Deliveries) != 1 || !first.Deliveries[0].FirstReceivedAt.Equal(at(1)) || first.Deliveries[0].FencingToken == 0 {
		t.Fatalf("first receive: %+v", first.Deliveries)
	}
	if r := run(t, m, Command{Op: OpNackReason, Now: at(2), Receipt: first.Deliveries[0].Receipt, Reason: "first failure"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	second := run(t, m, Command{Op: OpReceiveLimited, Now: at(3), Max: 1, MaxReceives: 2})
	if len(second.Deliveries) != 1 || second.Deliveries[0].FencingToken <= first.Deliveries[0].FencingToken {
		t.Fatalf("second receive: %+v", second.Deliveries)
	}
	if r := run(t, m, Command{Op: OpNackReason, Now: at(4), Receipt: second.Deliveries[0].Receipt, Reason: "downstream 503"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := run(t, m, Command{Op: OpReceiveLimited, Now: at(5), Max: 1, MaxReceives: 2}); r.Dead != 1 || len(r.Deliveries) != 0 {
		t.Fatalf("the third receive: %+v, want the message dead-lettered", r)
	}
	dead := m.DeadLetters(10)
	if len(dead) != 1 {
		t.Fatalf("dead letters %+v", dead)
	}
	d := dead[0]
	if d.ReceiveCount != 2 || !d.SentAt.Equal(t0) || !d.FirstReceivedAt.Equal(at(1)) || !d.LastReceivedAt.Equal(at(5)) || d.NackReason != "downstream 503" {
		t.Errorf("dead letter %+v: want 2 receives, sent %v, first received %v, moved by the receive at %v, reason %q",
			d, t0, at(1), at(5), "downstream 503")
	}
	// A reason over the limit would make an entry no replica decodes: NackReason cuts it,
	// at a character boundary.
	long := strings.Repeat("é", queue.MaxReasonLen)
	if _, err := Decode((&Command{Op: OpNackReason, Now: t0, Receipt: "r", Reason: long}).Encode(nil)); err == nil {
		t.Fatalf("a command with a %d-byte reason decoded", len(long))
	}
	cut := clipReason(long)
	if len(cut) > queue.MaxReasonLen || !utf8.ValidString(cut) || !strings.HasPrefix(long, cut) || len(cut) < queue.MaxReasonLen-1 {
		t.Fatalf("clipReason: %d bytes, valid %v", len(cut), utf8.ValidString(cut))
	}
	if _, err := Decode((&Command{Op: OpNackReason, Now: t0, Receipt: "r", Reason: cut}).Encode(nil)); err != nil {
		t.Fatalf("the cut reason: %v", err)
	}
}
