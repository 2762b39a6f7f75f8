package kafka

import (
	"context"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// authDescribe is the cluster permission the transaction listings need
// (Kafka filters by DESCRIBE on each transactional id; sluice's ACLs have
// no such resource).
const authDescribe = auth.Describe

// handleListTransactions (KIP-664) lists transactional ids with their
// producer and state, filtered by state names (an unknown one is echoed in
// UnknownStateFilters), producer ids, v1+ by running longer than a
// duration (KIP-994), v2+ by a regular expression on the id (KIP-1152;
// Go's RE2 syntax, close to Kafka's RE2J; a bad one is INVALID_REQUEST).
func handleListTransactions(_ context.Context, c *conn, req *kmsg.ListTransactionsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	if !c.mayCluster(authDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	f := broker.TxnFilter{ProducerIDs: req.ProducerIDFilters}
	for _, name := range req.StateFilters {
		if s, ok := broker.ParseTxnState(name); ok {
			f.States = append(f.States, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return msg(resp) // only unknown states: nothing matches
	}
	var re *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if re, err = regexp.Compile(*req.TransactionalIDPattern); err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return msg(resp)
		}
	}
	txns, err := c.s.b.ListTransactions(f)
	if err != nil {
		resp.ErrorCode = errCode(err, nil)
		return msg(resp)
	}
	now := time.Now()
	for _, t := range txns {
		if req.Version >= 1 && req.DurationFilterMillis >= 0 &&
			(t.Started.IsZero() || now.Sub(t.Started) < time.Duration(req.DurationFilterMillis)*time.Millisecond) {
			continue
		}
		if re != nil && !re.MatchString(t.ID) {
			continue
		}
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.TransactionState = t.ID, t.ProducerID, t.State.String()
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return msg(resp)
}
