package kafka

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// TestShareGroupErrors: each refusal is Kafka's code, and a refused
// request changes nothing: the records a refused ack names stay acquired
// by the member, which then acks them.
func TestShareGroupErrors(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{})
	n.createTopic("et", 1)
	setShareConfig(t, n, "eg", "share.auto.offset.reset", "earliest")
	produceN(t, n, "et", 4)
	m := n.shareMember(t, "eg", "m1", "et")
	if got := acquired(m.fetch(2)); len(got) != 2 {
		t.Fatalf("acquired %v", got)
	}
	top := func(r *kmsg.ShareFetchResponse) int16 { return r.ErrorCode }
	ackCode := func(r *kmsg.ShareFetchResponse) int16 { _, a := partErrs(r); return a }
	cases := []struct {
		name string
		do   func() int16
		want *kerr.Error
	}{
		{"ack of a record not acquired", func() int16 { return ackCode(m.fetch(0, ackRange{0, 2, 1})) }, kerr.InvalidRecordState},
		{"ack of a record past the log", func() int16 { return ackCode(m.fetch(0, ackRange{1 << 40, 1 << 41, 1})) }, kerr.InvalidRecordState},
		{"range backwards", func() int16 { return top(m.fetch(0, ackRange{1, 0, 1})) }, kerr.InvalidRequest},
		{"ranges overlap", func() int16 { return top(m.fetch(0, ackRange{0, 1, 1}, ackRange{1, 1, 1})) }, kerr.InvalidRequest},
		{"unknown ack type", func() int16 { return top(m.fetch(0, ackRange{0, 0, 9})) }, kerr.InvalidRequest},
		{"negative offset", func() int16 { return top(m.fetch(0, ackRange{-1, 0, 1})) }, kerr.InvalidRequest},
		{"wrong session epoch", func() int16 {
			m.sess += 5
			defer func() { m.sess -= 5 }()
			return top(m.fetch(0))
		}, kerr.InvalidShareSessionEpoch},
		{"acks when opening a session", func() int16 {
			s := m.sess
			m.sess = 0
			defer func() { m.sess = s }()
			return top(m.fetch(0, ackRange{0, 0, 1}))
		}, kerr.InvalidRequest},
		{"ShareAcknowledge opening a session", func() int16 {
			s := m.sess
			m.sess = 0
			defer func() { m.sess = s }()
			return m.ack(ackRange{0, 0, 1}).ErrorCode
		}, kerr.InvalidShareSessionEpoch},
		{"no session", func() int16 {
			o := n.shareMember(t, "eg", "m2", "et")
			o.sess = 1
			return top(o.fetch(0))
		}, kerr.ShareSessionNotFound},
		{"unknown member", func() int16 {
			o := &shareMember{t: t, r: n.raw(), group: "eg", id: "ghost", tid: m.tid, sess: 0}
			return top(o.fetch(0))
		}, kerr.UnknownMemberID},
		{"unknown group", func() int16 {
			o := &shareMember{t: t, r: n.raw(), group: "nogroup", id: "x", tid: m.tid}
			return top(o.fetch(0))
		}, kerr.GroupIDNotFound},
		{"fenced epoch", func() int16 { return m.heartbeat(m.epoch+7, nil).ErrorCode }, kerr.FencedMemberEpoch},
		{"heartbeat of an unknown member", func() int16 {
			o := &shareMember{t: t, r: n.raw(), group: "eg", id: "ghost"}
			return o.heartbeat(3, nil).ErrorCode
		}, kerr.UnknownMemberID},
		{"bad group id", func() int16 {
			o := &shareMember{t: t, r: n.raw(), group: "no/slash", id: "x"}
			return o.heartbeat(0, []string{"et"}).ErrorCode
		}, kerr.InvalidGroupID},
		{"bad lock duration", func() int16 { return setShareConfig(t, n, "eg", "share.record.lock.duration.ms", "5") }, kerr.InvalidConfig},
		{"unknown group config", func() int16 { return setShareConfig(t, n, "eg", "share.nope", "1") }, kerr.InvalidConfig},
		{"missing dead-letter queue", func() int16 { return setShareConfig(t, n, "eg", "sluice.share.dead.letter.queue", "absent") }, kerr.InvalidConfig},
	}
	for _, c := range cases {
		if got := c.do(); got != c.want.Code {
			t.Errorf("%s: got %v, want %v", c.name, kerr.ErrorForCode(got), c.want)
		}
	}
	// Nothing changed: 0 and 1 (and 2 and 3, which the first case's fetch
	// acquired) are still m's, and it accepts them all at once.
	r := m.fetch(10, ackRange{0, 3, 1})
	if r.ErrorCode != 0 || ackCode(r) != 0 {
		t.Fatalf("accept after the refusals: %v %v", kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(ackCode(r)))
	}
	if got := acquired(r); len(got) != 0 {
		t.Fatalf("then acquired %v, want nothing: all four are accepted", got)
	}
	if c := n.b.ShareGroupConfig("eg"); c.LockDuration != broker.DefaultShareConfig().LockDuration {
		t.Fatalf("a refused config was stored: %+v", c)
	}
}

// TestShareGroupDeadLetter: with sluice.share.dead.letter.queue set, a
// rejected record and one released at the delivery limit are copied to the
// queue (and never delivered again); without it they are archived.
func TestShareGroupDeadLetter(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{})
	n.createTopic("dt", 1)
	if _, err := n.b.CreateQueue(broker.QueueSettings{Name: "share-dlq"}); err != nil {
		t.Fatal(err)
	}
	if code := setShareConfig(t, n, "dg", "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2",
		"sluice.share.dead.letter.queue", "share-dlq"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	produceN(t, n, "dt", 3)
	m := n.shareMember(t, "dg", "m", "dt")
	if got := acquired(m.fetch(3)); len(got) != 3 {
		t.Fatalf("acquired %v", got)
	}
	// Reject 0, release 1 (count 1 < 2: redelivered), accept 2.
	if got := acquired(m.fetch(3, ackRange{0, 0, 3}, ackRange{1, 1, 2}, ackRange{2, 2, 1})); len(got) != 1 || got[1] != 2 {
		t.Fatalf("after release: %v", got)
	}
	// The lock of 1 runs out at the limit: the next fetch dead-letters it.
	clock.advance(31 * time.Second)
	m.heartbeat(m.epoch, nil)
	if got := acquired(m.fetch(3)); len(got) != 0 {
		t.Fatalf("record past its delivery limit delivered again: %v", got)
	}
	ds, err := n.b.Receive(testCtx(t, 5*time.Second), "share-dlq", broker.ReceiveOptions{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, d := range ds {
		bodies = append(bodies, string(d.Body))
	}
	slices.Sort(bodies)
	if !slices.Equal(bodies, []string{"a", "b"}) {
		t.Fatalf("dead-letter queue holds %q, want the rejected and the timed-out record", bodies)
	}
}

// TestShareGroupOffsets: DescribeShareGroupOffsets reports the start
// offset (SPSO) and lag as records are accepted; Alter and Delete are
// refused while the group has members (nothing changes), then move the
// start forward and delete the state.
func TestShareGroupOffsets(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{})
	n.createTopic("ot", 1)
	setShareConfig(t, n, "og", "share.auto.offset.reset", "earliest")
	produceN(t, n, "ot", 5)
	m := n.shareMember(t, "og", "m", "ot")
	m.fetch(2)
	m.fetch(1, ackRange{0, 1, 1})
	r := n.raw()
	describe := func() (start, lag int64, code int16) {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Version = 1
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "og"}}
		resp := r.do(req).(*kmsg.DescribeShareGroupOffsetsResponse)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("describe: %+v", resp)
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.StartOffset, p.Lag, p.ErrorCode
	}
	if s, l, code := describe(); s != 2 || l != 3 || code != 0 {
		t.Fatalf("start %d lag %d (%v), want 2 and 3", s, l, kerr.ErrorForCode(code))
	}
	alter := func(off int64) int16 {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = "og"
		req.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "ot", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: off}}}}
		return r.do(req).(*kmsg.AlterShareGroupOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	del := func() int16 {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = "og"
		req.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "ot"}}
		return r.do(req).(*kmsg.DeleteShareGroupOffsetsResponse).Topics[0].ErrorCode
	}
	if code := alter(4); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with a member: %v", kerr.ErrorForCode(code))
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %v", kerr.ErrorForCode(code))
	}
	if s, _, _ := describe(); s != 2 {
		t.Fatalf("a refused alter moved the start to %d", s)
	}
	m.heartbeat(-1, nil)
	for _, c := range []struct {
		off  int64
		want *kerr.Error
	}{{1, kerr.InvalidRequest}, {99, kerr.OffsetOutOfRange}, {4, nil}} {
		if code := alter(c.off); (c.want == nil && code != 0) || (c.want != nil && code != c.want.Code) {
			t.Fatalf("alter to %d: %v, want %v", c.off, kerr.ErrorForCode(code), c.want)
		}
	}
	if s, l, _ := describe(); s != 4 || l != 1 {
		t.Fatalf("after alter: start %d lag %d, want 4 and 1", s, l)
	}
	if code := del(); code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	if _, err := n.b.GetSubscription("ot", "og"); !errors.Is(err, broker.ErrSubscriptionNotFound) {
		t.Fatalf("subscription after delete: %v", err)
	}
}

// TestShareSessionEndsWithConnection: a share session lives on the
// connection that opened it; when that closes, its records are released at
// once (no lock has to run out: the clock does not move).
func TestShareSessionEndsWithConnection(t *testing.T) {
	clock := newTestClock()
	n := startConsumerNode(t, clock, broker.ConsumerGroupConfig{})
	n.createTopic("ct", 1)
	setShareConfig(t, n, "cg", "share.auto.offset.reset", "earliest")
	produceN(t, n, "ct", 2)
	a, b := n.shareMember(t, "cg", "a", "ct"), n.shareMember(t, "cg", "b", "ct")
	if got := acquired(a.fetch(10)); len(got) != 2 {
		t.Fatalf("a acquired %v", got)
	}
	if got := acquired(b.fetch(10)); len(got) != 0 {
		t.Fatalf("b acquired %v while a holds everything", got)
	}
	a.r.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := acquired(b.fetch(10))
		if len(got) == 2 {
			if got[0] != 2 || got[1] != 2 {
				t.Fatalf("released records came with counts %v, want 2", got)
			}
			return
		}
		if len(got) != 0 || time.Now().After(deadline) {
			t.Fatalf("after a's connection closed b acquired %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShareOffsetsErrCode: a failure to read a share-partition's state is the partition's
// error, never a silent "no state" (-1); a node whose catalog lacks the subscription sends
// the client back to FindCoordinator.
func TestShareOffsetsErrCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int16
	}{
		{&broker.NotLeaderError{What: "the catalog", Catalog: true, Leader: 2}, kerr.NotCoordinator.Code},
		{fmt.Errorf("read: %w", broker.ErrStorageFailed), kerr.KafkaStorageError.Code},
		{broker.ErrTopicNotFound, kerr.UnknownTopicOrPartition.Code},
	} {
		if got := shareOffsetsErrCode(tc.err); got != tc.want {
			t.Errorf("%v: code %d, want %d", tc.err, got, tc.want)
		}
	}
}
