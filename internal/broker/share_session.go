package broker

import (
	"context"
	"errors"
	"math"
	"sort"

	"github.com/sluice-mq/sluice/internal/queue"
)

// A share session (KIP-932): a member's set of share-partitions and the
// records it holds acquired, numbered by ShareSessionEpoch (0 opens, -1
// closes, every other request carries the epoch the last answer left).

// SharePartition names a share-partition in a session.
type SharePartition struct {
	Topic     string
	Partition int32
}

type shareHeld struct {
	receipt string
	count   int
}

type shareSession struct {
	conn  uint64 // the front end's connection that opened it (0: none)
	epoch int32
	parts []SharePartition // in the order they joined the session
	held  map[SharePartition]map[int64]shareHeld
	next  int // the partition the next fetch starts at
}

func (s *shareSession) has(sp SharePartition) bool {
	for _, p := range s.parts {
		if p == sp {
			return true
		}
	}
	return false
}

func (s *shareSession) add(sp SharePartition) {
	if !s.has(sp) {
		s.parts = append(s.parts, sp)
	}
}

func (s *shareSession) forget(sp SharePartition) []string {
	for i, p := range s.parts {
		if p == sp {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			break
		}
	}
	var rs []string
	for _, h := range s.held[sp] {
		rs = append(rs, h.receipt)
	}
	delete(s.held, sp)
	return rs
}

func (s *shareSession) bump() {
	if s.epoch == math.MaxInt32 {
		s.epoch = 1 // as Kafka wraps
		return
	}
	s.epoch++
}

// ShareMember names a share group member.
type ShareMember struct{ Group, MemberID string }

// ShareConnClosed ends the share sessions that connection conn opened and
// still owns, releasing their records: as in Kafka, a share session lives
// on one connection.
func (b *Broker) ShareConnClosed(conn uint64, members []ShareMember) {
	if b.cluster != nil {
		b.clusterShareConnClosed(conn, members) // cluster_share.go
		return
	}
	for _, gm := range members {
		g := b.shares().group(gm.Group, false)
		if g == nil {
			continue
		}
		g.mu.Lock()
		if m := g.members[gm.MemberID]; m != nil && m.session != nil && m.session.conn == conn {
			b.releaseSession(g.id, m.session)
			m.session = nil
		}
		g.mu.Unlock()
	}
}

// releaseSession makes every record a session holds available again (the
// member left, or opened a new session): Kafka's release on session close.
func (b *Broker) releaseSession(group string, s *shareSession) {
	for sp, held := range s.held {
		rs := make([]string, 0, len(held))
		for _, h := range held {
			rs = append(rs, h.receipt)
		}
		b.shareRelease(group, sp, rs)
	}
	s.held = map[SharePartition]map[int64]shareHeld{}
}

// shareRelease nacks receipts of a share-partition; a receipt gone stale
// (the lock ran out and someone else holds the record) is no one's loss.
func (b *Broker) shareRelease(group string, sp SharePartition, receipts []string) {
	if len(receipts) == 0 {
		return
	}
	_, sub, err := b.subscription(sp.Topic, group)
	if err != nil {
		return
	}
	if _, err := sub.leaseBatch(b.now, receipts, nackLease(0, "share session closed")); err != nil {
		b.log.Warn("releasing a closed share session's records", "group", group, "topic", sp.Topic, "err", err)
	}
}

// ShareAckBatch acknowledges [First, Last]: Types holds one type for the
// whole range or one per offset (0 gap, 1 accept, 2 release, 3 reject,
// 4 renew, KIP-1222).
type ShareAckBatch struct {
	First, Last int64
	Types       []int8
}

// The acknowledge types.
const (
	ShareAckGap     int8 = 0
	ShareAckAccept  int8 = 1
	ShareAckRelease int8 = 2
	ShareAckReject  int8 = 3
	ShareAckRenew   int8 = 4
)

// checkAckBatches refuses malformed batches (Kafka's INVALID_REQUEST):
// each well formed, ascending, not overlapping.
func checkAckBatches(bs []ShareAckBatch) error {
	prev := int64(-1)
	for _, b := range bs {
		switch {
		case b.First < 0 || b.Last < b.First:
			return invalid("acknowledgement_batches", "range [%d, %d] is empty or negative", b.First, b.Last)
		case b.First <= prev:
			return invalid("acknowledgement_batches", "range [%d, %d] overlaps or precedes the one before", b.First, b.Last)
		case len(b.Types) != 1 && int64(len(b.Types)) != b.Last-b.First+1:
			return invalid("acknowledgement_batches", "range [%d, %d] has %d types: want 1 or one per offset", b.First, b.Last, len(b.Types))
		}
		for _, t := range b.Types {
			if t < ShareAckGap || t > ShareAckRenew {
				return invalid("acknowledge_types", "%d: want 0 to 4", t)
			}
		}
		prev = b.Last
	}
	return nil
}

// shareAck is one acquired record to settle.
type shareAck struct {
	off int64
	h   shareHeld
	typ int8
}

// planAcks matches batches with what the session holds of a partition:
// every offset acknowledged other than as a gap must be held
// (ErrShareRecordState otherwise, and nothing is settled). It walks the
// held records, not the ranges, so a huge range costs no more than the
// session holds.
func planAcks(held map[int64]shareHeld, bs []ShareAckBatch) ([]shareAck, error) {
	offs := make([]int64, 0, len(held))
	for off := range held {
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	var out []shareAck
	for _, b := range bs {
		lo := sort.Search(len(offs), func(i int) bool { return offs[i] >= b.First })
		hi := sort.Search(len(offs), func(i int) bool { return offs[i] > b.Last })
		need := b.Last - b.First + 1 // offsets needing to be held
		if len(b.Types) > 1 {
			need = 0
			for _, t := range b.Types {
				if t != ShareAckGap {
					need++
				}
			}
		} else if b.Types[0] == ShareAckGap {
			need = 0
		}
		found := int64(0)
		for _, off := range offs[lo:hi] {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			if t != ShareAckGap {
				found++
			}
			out = append(out, shareAck{off, held[off], t})
		}
		if found != need {
			return nil, ErrShareRecordState
		}
	}
	return out, nil
}

// settleAcks applies a partition's planned acks and drops them from the
// session (renewed ones stay). Any refused (a lock that ran out and went to
// another member) makes the partition's answer ErrShareRecordState.
func (b *Broker) settleAcks(ctx context.Context, group string, cfg ShareConfig, s *shareSession, sp SharePartition, acks []shareAck) error {
	_, sub, err := b.subscription(sp.Topic, group)
	if err != nil {
		return err
	}
	var accept, release, archive, renew []string
	for _, a := range acks {
		switch {
		case a.typ == ShareAckGap || a.typ == ShareAckAccept:
			accept = append(accept, a.h.receipt)
		case a.typ == ShareAckRelease && a.h.count < cfg.DeliveryLimit:
			release = append(release, a.h.receipt)
		case a.typ == ShareAckRelease || a.typ == ShareAckReject:
			archive = append(archive, a.h.receipt)
		default:
			renew = append(renew, a.h.receipt)
		}
		if a.typ != ShareAckRenew {
			delete(s.held[sp], a.off)
		}
	}
	var errs []error
	run := func(rs []string, f func([]string) ([]error, error)) {
		if len(rs) == 0 {
			return
		}
		res, err := f(rs)
		errs = append(errs, err)
		for _, e := range res {
			if e != nil {
				errs = append(errs, ErrShareRecordState)
				return
			}
		}
	}
	run(accept, func(rs []string) ([]error, error) { return sub.leaseBatch(b.now, rs, ackLease) })
	run(release, func(rs []string) ([]error, error) { return sub.leaseBatch(b.now, rs, nackLease(0, "released")) })
	run(renew, func(rs []string) ([]error, error) {
		return sub.leaseBatch(b.now, rs, extendLease(cfg.LockDuration))
	})
	run(archive, func(rs []string) ([]error, error) {
		return sub.archive(ctx, rs, cfg.DeadLetterQueue, "rejected, or released at the delivery count limit")
	})
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, ErrShareRecordState) {
			return ErrShareRecordState
		}
		return err
	}
	return nil
}

// hold records an acquired delivery in the session.
func (s *shareSession) hold(sp SharePartition, receipt string, d queue.Delivery) {
	if s.held[sp] == nil {
		s.held[sp] = map[int64]shareHeld{}
	}
	s.held[sp][d.Offset] = shareHeld{receipt: receipt, count: d.ReceiveCount}
}
