package replqueue

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The sequential model the histories are checked against. Visibility is longer than any
// test run, so nothing becomes visible again: a Receive must return the oldest message not
// yet received (or nothing when there is none), and an Ack succeeds exactly when its
// receipt names a message received and not yet acked.

type opKind int

const (
	mSend opKind = iota
	mReceive
	mAck
)

type mInput struct {
	kind    opKind
	body    string // Send
	receipt string // Ack
}

// mOutput is what the client saw. unknown: the outcome is not known (a timeout, a killed
// node): the operation may or may not have taken effect.
type mOutput struct {
	unknown bool
	empty   bool   // Receive: nothing
	body    string // Receive
	receipt string // Receive
	stale   bool   // Ack: refused as stale
}

// mState is immutable: pending bodies in send order, and the in-flight receipts.
type mState struct {
	pending  string // bodies joined by ","
	inflight string // sorted "receipt=body" joined by ","
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (s mState) send(body string) mState {
	return mState{pending: strings.Join(append(split(s.pending), body), ","), inflight: s.inflight}
}

// receive pops the head; receipt "" is a receipt nobody saw (the delivery stays hidden).
func (s mState) receive(receipt string) (string, mState, bool) {
	p := split(s.pending)
	if len(p) == 0 {
		return "", s, false
	}
	in := split(s.inflight)
	if receipt != "" {
		in = append(in, receipt+"="+p[0])
		slices.Sort(in)
	}
	return p[0], mState{pending: strings.Join(p[1:], ","), inflight: strings.Join(in, ",")}, true
}

func (s mState) ack(receipt string) (mState, bool) {
	in := split(s.inflight)
	for i, e := range in {
		if strings.HasPrefix(e, receipt+"=") {
			return mState{pending: s.pending, inflight: strings.Join(slices.Delete(in, i, i+1), ",")}, true
		}
	}
	return s, false
}

func modelStep(state, input, output any) []any {
	s, in, out := state.(mState), input.(mInput), output.(mOutput)
	switch in.kind {
	case mSend:
		if out.unknown {
			return []any{s, s.send(in.body)}
		}
		return []any{s.send(in.body)}
	case mReceive:
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
		head, next, ok := s.receive(out.receipt)
		if !ok || head != out.body {
			return nil
		}
		return []any{next}
	case mAck:
		next, ok := s.ack(in.receipt)
		switch {
		case out.unknown && ok:
			return []any{s, next}
		case out.unknown:
			return []any{s}
		case out.stale && !ok:
			return []any{s}
		case !out.stale && ok:
			return []any{next}
		}
		return nil
	}
	return nil
}

var queueModel = (&porcupine.NondeterministicModel{
	Init:  func() []any { return []any{mState{}} },
	Step:  modelStep,
	Equal: func(a, b any) bool { return a.(mState) == b.(mState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(mInput), output.(mOutput)
		o := fmt.Sprintf("%+v", out)
		switch in.kind {
		case mSend:
			return fmt.Sprintf("send(%s) -> %s", in.body, o)
		case mReceive:
			return fmt.Sprintf("receive -> %s", o)
		}
		return fmt.Sprintf("ack(%.8s) -> %s", in.receipt, o)
	},
	DescribeState: func(s any) string { return fmt.Sprintf("%+v", s.(mState)) },
}).ToModel()
