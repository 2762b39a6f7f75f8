package broker

// Redrive in a cluster (docs/cluster.md, "Queues", its "Message move tasks"). A move task
// whose dead-letter queue is a cluster's runs on that queue's leader (StartRedrive
// elsewhere answers NotLeaderError, which the SQS front-end forwards) with the single
// node's loop (redrive_move.go): it receives from the dead-letter queue's group, Puts the
// copies into each destination's group (on its leader, here or through a request) under
// the key "c<dead-letter group>.<offset>", and acks the originals. A crash or failover
// between the Put and the ack leaves the message in both queues until its visibility
// ends in the dead-letter queue; the next task's copy of it is a duplicate the key drops
// (within the destination's dedup window). A task is this node's, saved in its data
// directory: it fails if the dead-letter queue's leadership moves (a receive answers
// NOT_LEADER). Its id names that node ("<hex>-n<node>"), so GetRedrive and CancelRedrive
// elsewhere answer NotLeaderError naming it, which the front-ends forward; ListRedrives
// answers this node's tasks (the native API asks every node, api/deadletter_fanout.go;
// SQS's ListMessageMoveTasks is forwarded to the dead-letter queue's leader,
// RedriveTasksHere).

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

// redriveID is a new task's id: 16 hex digits, and in a cluster "-n<node>" after them.
func (b *Broker) redriveID(random [8]byte) string {
	id := hex.EncodeToString(random[:])
	if b.cluster != nil {
		id += "-n" + strconv.FormatUint(uint64(b.cluster.node), 10)
	}
	return id
}

// redriveElsewhere is the answer for a task id this node does not have: NotLeaderError
// naming the node the id names, when that is another member of the cluster; else
// ErrRedriveNotFound.
func (b *Broker) redriveElsewhere(id string) error {
	notFound := fmt.Errorf("%w: %s", ErrRedriveNotFound, id)
	if b.cluster == nil {
		return notFound
	}
	_, ns, ok := strings.Cut(id, "-n")
	n, err := strconv.ParseUint(ns, 10, 64)
	if !ok || err != nil || multiraft.NodeID(n) == b.cluster.node {
		return notFound
	}
	if _, known := b.cluster.meta.State().Node(multiraft.NodeID(n)); !known {
		return notFound // a node since removed: its tasks went with it
	}
	return &NotLeaderError{What: "redrive task " + id, Leader: int32(n)}
}

// RedriveTasksHere reports whether the tasks of dead-letter queue source run on this node
// (nil), or NotLeaderError naming the node that leads it, where they do: a listing of one
// queue's tasks asked of another node is forwarded there.
func (b *Broker) RedriveTasksHere(source string) error {
	if b.cluster == nil || !b.cluster.clusteredQueue(source) {
		return nil
	}
	_, _, err := b.cluster.leaderQueue(source)
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		return err
	}
	return nil // here, or a queue deleted meanwhile: its tasks are this node's to list
}

// redriveDepth checks a cluster task's queues: both the cluster's, the source led here.
func (c *clusterRT) redriveDepth(req RedriveRequest) (int64, error) {
	if !c.clusteredQueue(req.Source) || (req.Destination != "" && !c.clusteredQueue(req.Destination)) {
		return 0, notReplicated("moving messages between a cluster's queue and a queue local to a node")
	}
	st, err := c.queueStats(req.Source)
	if err != nil {
		return 0, err // NotLeaderError: the task runs on the leader
	}
	return st.Depth(), nil
}

// redriveSend Puts copies of ds[i] for each i of idx into the cluster queue dest, keeping
// each message's id but not its dead-letter history, and marks in sent the ones committed.
func (c *clusterRT) redriveSend(ctx context.Context, source, dest string, ds []Delivery, idx []int, sent []bool) error {
	ss, err := c.getQueue(source)
	if err != nil {
		return err
	}
	ts, err := c.getQueue(dest)
	if err != nil {
		return err
	}
	msgs := make([]replqueue.Msg, len(idx))
	for k, i := range idx {
		m := &ds[i].Message
		group := m.GroupID
		if ts.FIFO && group == "" && m.DeadLetter != nil {
			group = m.DeadLetter.SourceQueue
		}
		if ts.FIFO && group == "" {
			group = source
		}
		if !ts.FIFO {
			group = ""
		}
		env := encodeEnvelope(m.Attributes, m.System, m.Body)
		msgs[k] = replqueue.Msg{Body: wrapCopy(copyHeader{id: m.ID}, env), Group: group, DedupID: m.DedupID,
			Key: copyKey(multiraft.GroupID(ss.ID), ds[i].Sequence)}
	}
	n, err := c.putChunked(ctx, dest, msgs, max(copyWindow, dedupWindow(ts)))
	for _, i := range idx[:n] {
		sent[i] = true
	}
	if err != nil {
		return fmt.Errorf("redrive %d messages to %s: %w", len(idx)-n, dest, err)
	}
	return nil
}
