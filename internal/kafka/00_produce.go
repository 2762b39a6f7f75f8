package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// produceTopicIDVersion is the first Produce version that names topics by
// id only (KIP-516); an id no topic has is UNKNOWN_TOPIC_ID.
const produceTopicIDVersion = 13

// produceImplicitTxnVersion is the first Produce version whose
// transactional batches add their partition to the transaction
// themselves (KIP-890 part 2); older ones must have been added by
// AddPartitionsToTxn (part 1's check).
const produceImplicitTxnVersion = 12

// batchOptions is what req's version asks of the broker.
func batchOptions(req *kmsg.ProduceRequest) broker.BatchOptions {
	return broker.BatchOptions{TxnImplicitAdd: req.Version >= produceImplicitTxnVersion}
}

// resolveProduceIDs names the topics of a v13+ request by their ids, so
// the rest of the path works with names; false if an id names no topic
// (handleProduce then answers UNKNOWN_TOPIC_ID for it).
func (c *conn) resolveProduceIDs(req *kmsg.ProduceRequest) bool {
	if req.Version < produceTopicIDVersion {
		return true
	}
	for i := range req.Topics {
		name, ok := c.topicNameByID(req.Topics[i].TopicID)
		if !ok {
			return false
		}
		req.Topics[i].Topic = name
	}
	return true
}

// handleProduce stores each partition's record batches exactly as the
// client sent them (the broker validates magic, lengths, CRC-32C, records
// and producer sequence). Partitions are written concurrently, so one
// request's partitions share the broker's group commit; the response waits
// for all of them to be durable. acks=0 gets no response at all.
func handleProduce(ctx context.Context, c *conn, req *kmsg.ProduceRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	opts := batchOptions(req)
	var refuse *kerr.Error
	switch {
	case req.TransactionID != nil && !c.mayIdempotent():
		// Transactional batches are checked against the coordinator by the
		// broker (KIP-890 part 1); the principal needs a transactional
		// producer's rights (22_init_producer_id.go).
		refuse = kerr.TransactionalIDAuthorizationFailed
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		refuse = kerr.InvalidRequiredAcks
	}
	type job struct {
		topic   string
		part    int32
		records []byte
		rp      *kmsg.ProduceResponseTopicPartition
	}
	var jobs []job
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		unknownID := false
		if req.Version >= produceTopicIDVersion {
			var ok bool
			t.Topic, ok = c.topicNameByID(t.TopicID)
			unknownID = !ok
		}
		denied := refuse == nil && !unknownID && !c.may(auth.Produce, auth.Topic, t.Topic)
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case refuse != nil:
				rp.ErrorCode = refuse.Code
				continue
			case unknownID:
				rp.ErrorCode = kerr.UnknownTopicID.Code
				continue
			case denied:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			jobs = append(jobs, job{t.Topic, p.Partition, p.Records, rp})
		}
	}
	if opts.TxnImplicitAdd && req.TransactionID != nil {
		parts := make([]txnPart, len(jobs))
		for i, j := range jobs {
			parts[i] = txnPart{j.topic, j.part, j.records}
		}
		c.addTxnPartitions(parts)
	}
	// Not cancelled by shutdown: an append that started must finish and
	// be answered, or a retry could store the batch twice.
	wctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() { c.producePartition(wctx, j.topic, j.part, j.records, j.rp, opts) })
	}
	wg.Wait()
	if req.Acks == 0 {
		return reply{none: true}, nil
	}
	return msg(resp)
}

// txnPart is one partition of a transactional produce v12+ request.
type txnPart struct {
	topic   string
	part    int32
	records []byte
}

// addTxnPartitions adds a transactional produce v12+ request's partitions
// to their producer's transaction in one durable step before any is
// appended (KIP-890 part 2), rather than one per partition as each
// append would; errors are left to each partition's own check, which
// answers them. The producer is the first batch's: a request carries one.
func (c *conn) addTxnPartitions(parts []txnPart) {
	var tps []broker.TxnPartition
	pid, epoch := int64(-1), int16(-1)
	for _, p := range parts {
		bs, err := splitBatches(p.records)
		if err != nil {
			continue
		}
		h, err := batch.ParseHeader(bs[0])
		if err != nil || !h.Transactional() || h.Control() || h.ProducerID < 0 || (pid >= 0 && (h.ProducerID != pid || h.ProducerEpoch != epoch)) {
			continue
		}
		pid, epoch = h.ProducerID, h.ProducerEpoch
		tps = append(tps, broker.TxnPartition{Topic: p.topic, Partition: p.part})
	}
	if len(tps) > 1 { // one partition: its append adds it, no saving
		_ = c.s.b.AddTxnPartitionsImplicit(pid, epoch, tps)
	}
}

// producePartition writes one partition's batches and fills its answer.
// A duplicate of an idempotent batch already stored answers success with
// the offset it got the first time, as Kafka does.
func (c *conn) producePartition(ctx context.Context, topic string, part int32, records []byte, rp *kmsg.ProduceResponseTopicPartition, opts broker.BatchOptions) {
	batches, err := splitBatches(records)
	if err != nil {
		rp.ErrorCode = kerr.CorruptMessage.Code
		rp.ErrorMessage = errMessage(err)
		return
	}
	res, err := c.s.b.ProduceBatchesWith(ctx, topic, part, batches, opts)
	if err != nil {
		rp.ErrorCode = errCode(err, kerr.CorruptMessage)
		rp.ErrorMessage = errMessage(err)
		return
	}
	rp.BaseOffset = res.BaseOffsets[0]
	rp.LogStartOffset = res.LogStartOffset
	rp.LogAppendTime = -1
}

// splitBatches cuts a produce request's records into batches by their
// length prefix and checks the magic byte; the broker validates the rest.
func splitBatches(records []byte) ([][]byte, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: no record batches", broker.ErrCorruptBatch)
	}
	var out [][]byte
	for len(records) > 0 {
		n, err := batch.FrameSize(records)
		if err != nil {
			return nil, err
		}
		if n > int64(len(records)) {
			return nil, fmt.Errorf("batch of %d bytes truncated to %d", n, len(records))
		}
		if len(records) > 16 && records[16] != batch.Magic {
			return nil, fmt.Errorf("record batch magic %d: produce v3+ carries magic 2 only", records[16])
		}
		out = append(out, records[:n:n])
		records = records[n:]
	}
	return out, nil
}
