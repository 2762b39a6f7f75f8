package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleAddPartitionsToTxn adds partitions to a producer's transaction
// (v0-3, from clients) or, v4+, for each of several transactions (the
// form brokers send each other; verifyOnly asks KIP-890's question, is the
// partition already in it, without adding). Kafka adds nothing when one
// partition is unknown: that one answers UNKNOWN_TOPIC_OR_PARTITION and
// the others OPERATION_NOT_ATTEMPTED. Transactional requests need what an
// idempotent producer needs (produce on the cluster or on some topic:
// there is no transactional-id resource in sluice's ACLs), and produce on
// each topic added.
func handleAddPartitionsToTxn(_ context.Context, c *conn, req *kmsg.AddPartitionsToTxnRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var topics []kmsg.AddPartitionsToTxnRequestTransactionTopic
		for _, t := range req.Topics {
			topics = append(topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		tx := kmsg.AddPartitionsToTxnRequestTransaction{TransactionalID: req.TransactionalID,
			ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Topics: topics}
		for _, rt := range c.addPartitions(tx).Topics {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, rp.ErrorCode
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return msg(resp)
	}
	if !c.may(auth.Alter, auth.Cluster, "") {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	for _, tx := range req.Transactions {
		resp.Transactions = append(resp.Transactions, c.addPartitions(tx))
	}
	return msg(resp)
}

// addPartitions answers one transaction's partitions, each with one code.
func (c *conn) addPartitions(tx kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	var parts []broker.TxnPartition
	for _, t := range tx.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, broker.TxnPartition{Topic: t.Topic, Partition: p})
		}
	}
	codes := make([]int16, len(parts))
	fill := func(code int16) {
		for i := range codes {
			codes[i] = code
		}
	}
	denied := false
	for i, p := range parts {
		if !c.may(auth.Produce, auth.Topic, p.Topic) {
			codes[i], denied = kerr.TopicAuthorizationFailed.Code, true
		}
	}
	switch {
	case !c.mayIdempotent():
		fill(kerr.TransactionalIDAuthorizationFailed.Code)
	case denied:
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
	default:
		var errs []error
		var err error
		if tx.VerifyOnly {
			errs, err = c.s.b.VerifyTxnPartitions(tx.ProducerID, tx.ProducerEpoch, parts)
		} else {
			errs, err = c.s.b.AddPartitionsToTxn(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts)
		}
		if err != nil {
			fill(errCode(err, nil))
			break
		}
		unknown := false
		for i, e := range errs {
			if codes[i] = errCode(e, nil); e != nil && !tx.VerifyOnly {
				unknown = true
			}
		}
		if unknown {
			for i := range codes {
				if codes[i] == 0 {
					codes[i] = kerr.OperationNotAttempted.Code
				}
			}
		}
	}
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = tx.TransactionalID
	i := 0
	for _, t := range tx.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = p, codes[i]
			rt.Partitions = append(rt.Partitions, rp)
			i++
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}
