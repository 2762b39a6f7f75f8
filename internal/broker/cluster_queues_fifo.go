package broker

// FIFO queues in a cluster. A call's messages go in one replqueue Put entry, so they are
// ordered as the call lists them and committed (or not) together: a failover never keeps
// a later message of a group without an earlier one of the same call. Deduplication is
// the group's replicated state (replqueue's dedup.go): the key a single node's Deduper
// would use, remembered for the queue's window by the entry's clock, in the snapshot, so
// a retry on the new leader after a failover is still answered with the original.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

// Dedup keys are namespaced: a client's ("u") never meets a copy's ("c", cluster_queues_dlq.go).
func userKey(s QueueSettings, group, dedup string) string { return "u" + dedupKey(s, group, dedup) }

// fifoFields checks a FIFO message's group and dedup id as a single node's prepare does and
// returns the dedup id (the body's SHA-256 under content-based deduplication).
func fifoFields(s QueueSettings, in *SendInput) (string, error) {
	if in.GroupID == "" {
		return "", invalid("group_id", "a FIFO queue needs a message group id")
	}
	if len(in.GroupID) > 128 || len(in.DedupID) > 128 {
		return "", invalid("group_id", "group and deduplication ids are at most 128 characters")
	}
	if in.DedupID != "" {
		return in.DedupID, nil
	}
	if !s.ContentBasedDedup {
		return "", invalid("dedup_id", "the queue has no content-based deduplication, so a deduplication id is required")
	}
	sum := sha256.Sum256(in.Body)
	return hex.EncodeToString(sum[:]), nil
}

// sendFIFO sends a call's valid messages in one Put.
func (c *clusterRT) sendFIFO(ctx context.Context, h *hostedQueue, s QueueSettings, in []SendInput) ([]SendResult, error) {
	results := make([]SendResult, len(in))
	var msgs []replqueue.Msg
	var idx []int
	for i := range in {
		body, delay, err := envelope(s, &in[i])
		var dedup string
		if err == nil {
			dedup, err = fifoFields(s, &in[i])
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		msgs = append(msgs, replqueue.Msg{Body: body, Delay: delay, Group: in[i].GroupID, DedupID: dedup,
			Key: userKey(s, in[i].GroupID, dedup)})
		idx = append(idx, i)
	}
	if len(msgs) == 0 {
		return results, nil
	}
	ctx, cancel := context.WithTimeout(ctx, replTimeout)
	defer cancel()
	outs, err := h.q.Put(ctx, msgs, dedupWindow(s))
	if err != nil {
		return nil, replErr(h.name, err)
	}
	for k, i := range idx {
		o := outs[k]
		results[i] = SendResult{ID: messageID(h.group, o.Offset), Sequence: o.Offset, Duplicate: o.Duplicate}
	}
	return results, nil
}

func dedupWindow(s QueueSettings) time.Duration {
	if s.DedupWindow > 0 {
		return s.DedupWindow
	}
	return DefaultDedupWindow
}
