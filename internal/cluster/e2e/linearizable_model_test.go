package e2e

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// The sequential model an SQS queue's history is checked against
// (TestQueueLinearizableUnderPartition). The visibility timeout is longer than the test,
// so nothing received becomes visible again: a ReceiveMessage of one message returns the
// oldest message not yet received, or nothing when there is none; a DeleteMessage of a
// received, undeleted message deletes it, and of any other receipt changes nothing and
// succeeds (SQS's DeleteMessage of a stale receipt, and sluice's: internal/sqs
// delete_message.go). An operation whose answer was an error or never came has an
// unknown outcome: it may have taken effect, at any time after it was called.

type qOp int

const (
	qSend qOp = iota
	qReceive
	qDelete
)

type qInput struct {
	op      qOp
	body    string // send
	receipt string // delete: the test's short name for the receipt (r<n>)
}

type qOutput struct {
	unknown bool
	empty   bool   // receive: no message
	body    string // receive
	receipt string // receive: r<n>
}

// qState is immutable and comparable: the bodies not yet received, in send order, and the
// received, undeleted ones as sorted "receipt=body".
type qState struct {
	pending  string
	inflight string
}

func fields(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (s qState) send(body string) qState {
	return qState{pending: strings.Join(append(fields(s.pending), body), ","), inflight: s.inflight}
}

// receive takes the oldest pending body; receipt "" is a receive whose answer was lost
// (the message is hidden and no receipt of it is known).
func (s qState) receive(receipt string) (string, qState, bool) {
	p := fields(s.pending)
	if len(p) == 0 {
		return "", s, false
	}
	in := fields(s.inflight)
	if receipt != "" {
		in = append(in, receipt+"="+p[0])
		slices.Sort(in)
	}
	return p[0], qState{pending: strings.Join(p[1:], ","), inflight: strings.Join(in, ",")}, true
}

func (s qState) remove(receipt string) (qState, bool) {
	in := fields(s.inflight)
	for i, e := range in {
		if strings.HasPrefix(e, receipt+"=") {
			return qState{pending: s.pending, inflight: strings.Join(slices.Delete(in, i, i+1), ",")}, true
		}
	}
	return s, false
}

func qStep(state, input, output any) []any {
	s, in, out := state.(qState), input.(qInput), output.(qOutput)
	switch in.op {
	case qSend:
		if out.unknown {
			return []any{s, s.send(in.body)}
		}
		return []any{s.send(in.body)}
	case qReceive:
		if out.unknown {
			if _, next, ok := s.receive(""); ok {
				return []any{s, next}
			}
			return []any{s}
		}
		if out.empty {
			if s.pending == "" {
				return []any{s}
			}
			return nil
		}
		if head, next, ok := s.receive(out.receipt); ok && head == out.body {
			return []any{next}
		}
		return nil
	case qDelete:
		next, ok := s.remove(in.receipt)
		if out.unknown && ok {
			return []any{s, next}
		}
		return []any{next} // next is s when the receipt was not in flight
	}
	return nil
}

var sqsQueueModel = (&porcupine.NondeterministicModel{
	Init:  func() []any { return []any{qState{}} },
	Step:  qStep,
	Equal: func(a, b any) bool { return a.(qState) == b.(qState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(qInput), output.(qOutput)
		o := "ok"
		switch {
		case out.unknown:
			o = "unknown"
		case out.empty:
			o = "empty"
		case in.op == qReceive:
			o = out.body + " " + out.receipt
		}
		switch in.op {
		case qSend:
			return fmt.Sprintf("send(%s) -> %s", in.body, o)
		case qReceive:
			return "receive -> " + o
		}
		return fmt.Sprintf("delete(%s) -> %s", in.receipt, o)
	},
	DescribeState: func(s any) string { return fmt.Sprintf("%+v", s.(qState)) },
}).ToModel()

// TestSQSQueueModel: the model refuses what a broken queue would do and accepts what a
// correct one may, so the partition test's check can fail.
func TestSQSQueueModel(t *testing.T) {
	send := func(c int, b string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: qInput{op: qSend, body: b}, Output: qOutput{}, Call: call, Return: ret}
	}
	lost := func(c int, in qInput, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Output: qOutput{unknown: true}, Call: call, Return: math.MaxInt64}
	}
	recv := func(c int, b, r string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: qInput{op: qReceive}, Output: qOutput{body: b, receipt: r, empty: b == ""}, Call: call, Return: ret}
	}
	del := func(c int, r string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: qInput{op: qDelete, receipt: r}, Output: qOutput{}, Call: call, Return: ret}
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"send, receive, delete, empty", []porcupine.Operation{send(1, "a", 0, 1), recv(1, "a", "r0", 2, 3), del(1, "r0", 4, 5), recv(1, "", "", 6, 7)}, porcupine.Ok},
		{"a delete of a deleted receipt succeeds", []porcupine.Operation{send(1, "a", 0, 1), recv(1, "a", "r0", 2, 3), del(1, "r0", 4, 5), del(1, "r0", 6, 7)}, porcupine.Ok},
		{"a lost send is received later", []porcupine.Operation{lost(1, qInput{op: qSend, body: "a"}, 0), recv(2, "a", "r0", 10, 11)}, porcupine.Ok},
		{"a lost receive hid the message", []porcupine.Operation{send(1, "a", 0, 1), lost(2, qInput{op: qReceive}, 2), recv(1, "", "", 5, 6)}, porcupine.Ok},
		{"concurrent sends in either order", []porcupine.Operation{send(1, "a", 0, 5), send(2, "b", 1, 4), recv(1, "b", "r0", 6, 7), recv(1, "a", "r1", 8, 9)}, porcupine.Ok},
		{"received before it was sent", []porcupine.Operation{recv(1, "a", "r0", 0, 1), send(2, "a", 2, 3)}, porcupine.Illegal},
		{"received twice", []porcupine.Operation{send(1, "a", 0, 1), recv(1, "a", "r0", 2, 3), recv(2, "a", "r1", 4, 5)}, porcupine.Illegal},
		{"received after its delete", []porcupine.Operation{send(1, "a", 0, 1), recv(1, "a", "r0", 2, 3), del(1, "r0", 4, 5), recv(2, "a", "r1", 6, 7)}, porcupine.Illegal},
		{"empty while a message waits", []porcupine.Operation{send(1, "a", 0, 1), recv(2, "", "", 2, 3)}, porcupine.Illegal},
		{"out of order", []porcupine.Operation{send(1, "a", 0, 1), send(1, "b", 2, 3), recv(2, "b", "r0", 4, 5)}, porcupine.Illegal},
		{"an acknowledged send lost", []porcupine.Operation{send(1, "a", 0, 1), recv(1, "", "", 2, 3)}, porcupine.Illegal},
	} {
		if got := porcupine.CheckOperations(sqsQueueModel, tc.ops); (got && tc.want != porcupine.Ok) || (!got && tc.want == porcupine.Ok) {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
