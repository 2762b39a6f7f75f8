package kafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// On a cluster node ElectLeaders (PREFERRED) makes each partition's
// preferred replica, the first of its replicas, its leader
// (broker.ElectPreferredLeader: the partition's Raft leader transfers
// leadership), answering once it leads: ELECTION_NOT_NEEDED if it did,
// PREFERRED_LEADER_NOT_AVAILABLE if it is not in sync, REQUEST_TIMED_OUT
// if the request's timeout passed first. UNCLEAN elections are never made:
// Raft elects only with a quorum's votes, so a partition with a leader
// answers ELECTION_NOT_NEEDED and one without ELIGIBLE_LEADERS_NOT_AVAILABLE.

// election is one partition to elect: its answer is (*rp)[i].
type election struct {
	topic string
	rp    *[]kmsg.ElectLeadersResponseTopicPartition
	i     int
}

// electParallel bounds the partitions elected at once: each waits for its
// transfer (a few Raft round trips).
const electParallel = 8

func clusterElect(ctx context.Context, c *conn, req *kmsg.ElectLeadersRequest, elect []election) {
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > time.Minute {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sem := make(chan struct{}, electParallel)
	var wg sync.WaitGroup
	for _, e := range elect {
		rp := &(*e.rp)[e.i]
		if req.ElectionType == 1 { // unclean
			uncleanElection(c, e.topic, rp)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := c.s.b.ElectPreferredLeader(ctx, e.topic, rp.Partition)
			rp.ErrorCode, rp.ErrorMessage = electErrCode(err), errMessage(err)
		})
	}
	wg.Wait()
}

func uncleanElection(c *conn, topic string, rp *kmsg.ElectLeadersResponseTopicPartition) {
	pl, err := c.s.b.PartitionPlacement(topic, rp.Partition)
	switch {
	case err != nil:
		rp.ErrorCode, rp.ErrorMessage = errCode(err, nil), errMessage(err)
	case pl.Leader != 0:
		m := "the partition has a leader; Raft never elects one out of sync"
		rp.ErrorCode, rp.ErrorMessage = kerr.ElectionNotNeeded.Code, &m
	default:
		m := "no leader: Raft elects one only with a quorum of the replicas alive, never out of sync"
		rp.ErrorCode, rp.ErrorMessage = kerr.EligibleLeadersNotAvailable.Code, &m
	}
}

func electErrCode(err error) int16 {
	var nl *broker.NotLeaderError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, broker.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code
	case errors.Is(err, broker.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable.Code
	case errors.Is(err, broker.ErrElectionTimedOut):
		return kerr.RequestTimedOut.Code
	case errors.As(err, &nl):
		return kerr.EligibleLeadersNotAvailable.Code
	}
	return errCode(err, nil)
}
