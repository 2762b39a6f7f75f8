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
// NOT_LEADER), and GetRedrive and ListRedrives answer only on the node that ran it.

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

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
