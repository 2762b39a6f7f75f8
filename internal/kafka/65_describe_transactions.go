package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// handleDescribeTransactions (KIP-664) answers each transactional id's
// state, producer, timeout, start time and partitions;
// TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know.
// It needs describe on the cluster (Kafka: DESCRIBE on the id).
func handleDescribeTransactions(_ context.Context, c *conn, req *kmsg.DescribeTransactionsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	state := func(id string, code int16) kmsg.DescribeTransactionsResponseTransactionState {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch, s.StartTimestamp = id, code, -1, -1, -1
		return s
	}
	if !c.mayCluster(authDescribe) {
		for _, id := range req.TransactionalIDs {
			resp.TransactionStates = append(resp.TransactionStates, state(id, kerr.TransactionalIDAuthorizationFailed.Code))
		}
		return msg(resp)
	}
	found, missing, err := c.s.b.DescribeTransactions(req.TransactionalIDs)
	if err != nil {
		for _, id := range req.TransactionalIDs {
			resp.TransactionStates = append(resp.TransactionStates, state(id, errCode(err, nil)))
		}
		return msg(resp)
	}
	for _, t := range found {
		resp.TransactionStates = append(resp.TransactionStates, describeTxn(t))
	}
	for _, id := range missing {
		resp.TransactionStates = append(resp.TransactionStates, state(id, kerr.TransactionalIDNotFound.Code))
	}
	return msg(resp)
}

func describeTxn(t broker.Transaction) kmsg.DescribeTransactionsResponseTransactionState {
	s := kmsg.NewDescribeTransactionsResponseTransactionState()
	s.TransactionalID, s.State = t.ID, t.State.String()
	s.TimeoutMillis = int32(t.Timeout.Milliseconds())
	s.StartTimestamp = -1
	if !t.Started.IsZero() {
		s.StartTimestamp = t.Started.UnixMilli()
	}
	s.ProducerID, s.ProducerEpoch = t.ProducerID, t.Epoch
	for i, p := range t.Partitions {
		if i == 0 || t.Partitions[i-1].Topic != p.Topic {
			rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			rt.Topic = p.Topic
			s.Topics = append(s.Topics, rt)
		}
		last := &s.Topics[len(s.Topics)-1]
		last.Partitions = append(last.Partitions, p.Partition)
	}
	return s
}
