package broker

// Dead-letter queues in a cluster (docs/cluster.md, "Queues", its "Dead-letter queues").
//
// The source queue and its dead-letter queue are two Raft groups, maybe led by different
// nodes, so a move cannot be one entry. It is three steps, each a committed entry:
//
//  1. a limited Receive in the source's group moves the message over maxReceiveCount out
//     of the cursor into the group's dead letters (replqueue dead.go: replicated, in the
//     snapshot);
//  2. the source's leader Puts a copy into the dead-letter queue's group (its leader:
//     here, or through a multiraft request to the node that leads it) under the key
//     "c<source group>.<offset>", which that group remembers for its dedup window;
//  3. once the Put is committed, a DeadDone in the source's group drops the dead letter.
//
// A crash or a failover before 2 commits leaves the message in the source's dead letters
// (the next leader copies it); between 2 and 3, in both, and the next leader's copy is
// answered as a duplicate by the key; only a copy retried after the dead-letter queue's
// window has passed is stored twice. So a message is in one of the queues or in both,
// never in neither: at least once, as SQS's own dead-letter moves are.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
	"github.com/sluice-mq/sluice/internal/queue"
)

// moveBatch bounds the dead letters one round copies.
const moveBatch = 100

// receiveLimit is the limit a Receive carries: the redrive policy's maxReceiveCount (0:
// none, the queue has no dead-letter queue).
func receiveLimit(s QueueSettings) int {
	if s.DeadLetterQueue == "" {
		return 0
	}
	return s.MaxReceives
}

// copyKey is the dedup key of a copy of offset off of group g: the same for every retry
// of one move.
func copyKey(g multiraft.GroupID, off int64) string {
	return "c" + strconv.FormatUint(uint64(g), 10) + "." + strconv.FormatInt(off, 10)
}

// copyWindow is how long a copy's key is remembered at least: a move interrupted for
// longer than this may store its copy twice.
const copyWindow = queue.DefaultDedupWindow

// moveHook, when set (tests), runs between a move's steps 2 and 3 ("copied") and may stop
// it there, as a crash would.
var moveHook atomic.Pointer[func(stage string, h *hostedQueue) bool]

// moveDeadLetters copies h's dead letters to its dead-letter queue and drops them, while
// this node leads h and there are any. One mover per queue at a time.
func (c *clusterRT) moveDeadLetters(h *hostedQueue) {
	if !h.moving.CompareAndSwap(false, true) {
		return
	}
	defer h.moving.Store(false)
	for {
		n, err := c.moveDeadRound(h)
		if err != nil {
			c.log.Debug("cluster: dead-letter move will be retried", "queue", h.name, "err", err)
			return
		}
		if n == 0 {
			return
		}
	}
}

func (c *clusterRT) moveDeadRound(h *hostedQueue) (int, error) {
	dead := h.sm.DeadLetters(moveBatch)
	if len(dead) == 0 {
		return 0, nil
	}
	lh, s, err := c.leaderQueue(h.name)
	if err != nil || lh != h {
		return 0, err // only the leader moves (a DeadDone needs it anyway)
	}
	target := s.DeadLetterQueue
	if target == "" {
		return 0, fmt.Errorf("the redrive policy was removed: %d dead letters wait for a dead-letter queue", len(dead))
	}
	ts, err := c.getQueue(target)
	if err != nil {
		return 0, err
	}
	history := c.meta.State().FeatureLevel() >= meta.LevelDeadLetterHistory
	msgs := make([]replqueue.Msg, len(dead))
	offs := make([]int64, len(dead))
	for i, d := range dead {
		offs[i] = d.Offset
		group := d.Group
		if ts.FIFO && group == "" {
			group = h.name
		}
		msgs[i] = replqueue.Msg{Body: wrapCopy(deadCopyHeader(h.name, h.group, d, history), d.Body),
			Group: group, DedupID: d.Dedup, Key: copyKey(h.group, d.Offset)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), replTimeout)
	defer cancel()
	n, perr := c.putChunked(ctx, target, msgs, max(copyWindow, dedupWindow(ts)))
	if n == 0 {
		return 0, fmt.Errorf("copy to dead-letter queue %s: %w", target, perr)
	}
	if hook := moveHook.Load(); hook != nil && !(*hook)("copied", h) {
		return 0, errors.New("stopped by the test hook")
	}
	if err := h.q.DeadDone(ctx, offs[:n]); err != nil {
		return 0, err
	}
	if perr != nil {
		return 0, fmt.Errorf("copy to dead-letter queue %s: %w", target, perr)
	}
	return n, nil
}

// putBytes bounds one Put of copies: one Raft entry of about this size at most (a single
// larger message goes alone).
const putBytes = 1 << 20

// putChunked puts msgs in order, in entries of at most putBytes, and returns how many
// (a prefix) are committed.
func (c *clusterRT) putChunked(ctx context.Context, target string, msgs []replqueue.Msg, window time.Duration) (int, error) {
	done := 0
	for done < len(msgs) {
		n, size := 0, 0
		for done+n < len(msgs) && (n == 0 || size+len(msgs[done+n].Body) <= putBytes) {
			size += len(msgs[done+n].Body)
			n++
		}
		if _, err := c.putCopies(ctx, target, msgs[done:done+n], window); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// putCopies puts msgs into queue name's group on its leader: here, or through a request to
// the node that leads it (wakingMachine.ServeRequest there).
func (c *clusterRT) putCopies(ctx context.Context, name string, msgs []replqueue.Msg, window time.Duration) ([]replqueue.PutOutcome, error) {
	h, _, err := c.leaderQueue(name)
	if err == nil {
		return h.q.Put(ctx, msgs, window)
	}
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader == 0 || multiraft.NodeID(nl.Leader) == c.node {
		return nil, err
	}
	cq, err := c.catalogQueue(name)
	if err != nil {
		return nil, err
	}
	cmd := replqueue.Command{Op: replqueue.OpPut, Msgs: msgs, Window: window}
	resp, err := c.host.Request(ctx, multiraft.NodeID(nl.Leader), cq.Group, cmd.Encode(nil))
	if err != nil {
		return nil, err
	}
	return decodePutOutcomes(resp, len(msgs))
}

// ServeRequest answers a peer's Put of copies into this queue (putCopies there) by
// proposing it in the group, as any client's send is: it changes the queue only through a
// committed entry; and a peer's election request (cluster_elect.go). Anything else is
// refused.
func (w *wakingMachine) ServeRequest(from multiraft.NodeID, req []byte) ([]byte, error) {
	if len(req) == 1 && req[0] == electRequestTag && w.elect != nil {
		return w.elect(context.Background()), nil
	}
	cmd, err := replqueue.Decode(req)
	if err != nil || cmd.Op != replqueue.OpPut {
		return nil, fmt.Errorf("queue group: request refused (want a Put): %v", err)
	}
	q := w.queue.Load()
	if q == nil {
		return nil, errors.New("queue group: not serving yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), replTimeout/2)
	defer cancel()
	outs, err := q.Put(ctx, cmd.Msgs, cmd.Window)
	if err != nil {
		return nil, err
	}
	var b []byte
	for _, o := range outs {
		b = binary.AppendUvarint(b, uint64(o.Offset))
		if o.Duplicate {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b, nil
}

func decodePutOutcomes(b []byte, n int) ([]replqueue.PutOutcome, error) {
	out := make([]replqueue.PutOutcome, 0, n)
	for range n {
		off, k := binary.Uvarint(b)
		if k <= 0 || len(b) < k+1 || b[k] > 1 {
			return nil, errors.New("malformed answer to a put of copies")
		}
		out = append(out, replqueue.PutOutcome{Offset: int64(off), Duplicate: b[k] == 1})
		b = b[k+1:]
	}
	return out, nil
}

// moveAllDeadLetters starts a mover for every queue this node leads that holds dead
// letters: after a failover the new leader finishes the moves the old one began.
func (c *clusterRT) moveAllDeadLetters(hosted []*hostedQueue) {
	for _, h := range hosted {
		if h.sm.Depth().Dead > 0 && !h.moving.Load() {
			go c.moveDeadLetters(h)
		}
	}
}

// deadCopyHeader is the copy header of dead letter d of queue source (group g): its id,
// source and receive count, and with history its original send time (a copy's own
// header's, when d is itself a copy: a dead-letter queue's dead letter), first and last
// receive and last nack reason.
func deadCopyHeader(source string, g multiraft.GroupID, d replqueue.DeadLetter, history bool) copyHeader {
	h := copyHeader{id: messageID(g, d.Offset), source: source, count: d.ReceiveCount, history: history,
		sentAt: d.SentAt, firstAt: d.FirstReceivedAt, lastAt: d.LastReceivedAt, reason: d.NackReason}
	if inner, _, err := unwrapCopy(d.Body); err == nil && inner.id != "" {
		h.id = inner.id // a copy keeps the message's id
		if !inner.sentAt.IsZero() {
			h.sentAt = inner.sentAt
		}
	}
	return h
}
