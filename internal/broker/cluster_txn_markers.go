package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/txn"
)

// Markers in a cluster: the coordinator (the controller) cannot append to a partition it
// does not lead, so it asks each partition's leader, over the cluster transport's
// requests (multiraft.Requester, addressed to the partition's group), to write the
// marker; the leader proposes it to its group like any batch, after the batches it
// admitted for that producer, and answers once it is committed. The coordinator completes
// the transaction once every partition answered. A request may be repeated (a retry, a new
// controller finishing what was prepared, a deposed one still finishing): the marker
// carries the transaction's sequence (txn.Txn.Seq, counted at each decision) in its
// coordinator epoch, and every replica ignores at apply a marker not after the last it
// applied for the producer (cluster_txn_apply.go), so a repeated marker can never end the
// producer's next transaction.

// markerRequestTag is a marker request's first byte; a pull request's is 1 (replpart).
const markerRequestTag = 'M'

// markerTimeout bounds one WriteMarkers round: what is not written then is retried by
// the coordinator's next tick.
const markerTimeout = 15 * time.Second

// markerRequest asks a partition's leader for one marker.
//
//	'M' pid(varint) epoch(varint) commit(1) seq(varint)
type markerRequest struct {
	pid    int64
	epoch  int16
	commit bool
	seq    int32
}

func (m markerRequest) encode() []byte {
	b := binary.AppendVarint([]byte{markerRequestTag}, m.pid)
	b = binary.AppendVarint(b, int64(m.epoch))
	c := byte(0)
	if m.commit {
		c = 1
	}
	return binary.AppendVarint(append(b, c), int64(m.seq))
}

var errBadMarkerRequest = errors.New("broker: malformed marker request")

func decodeMarkerRequest(b []byte) (markerRequest, error) {
	var m markerRequest
	if len(b) < 1 || b[0] != markerRequestTag {
		return m, errBadMarkerRequest
	}
	b = b[1:]
	pid, n := binary.Varint(b)
	if n <= 0 {
		return m, errBadMarkerRequest
	}
	b = b[n:]
	epoch, n := binary.Varint(b)
	if n <= 0 || len(b) < n+1 || b[n] > 1 {
		return m, errBadMarkerRequest
	}
	m.commit, b = b[n] == 1, b[n+1:]
	seq, n := binary.Varint(b)
	if n <= 0 || n != len(b) || pid < 0 || epoch < 0 || epoch > 1<<15-1 || seq < -1<<31 || seq > 1<<31-1 {
		return m, errBadMarkerRequest
	}
	m.pid, m.epoch, m.seq = pid, int16(epoch), int32(seq)
	return m, nil
}

// A marker request's answer: done, or not the leader (then the leader's id, 0 unknown).
const (
	markerDone      = 0
	markerNotLeader = 1
)

func notLeaderAnswer(leader multiraft.NodeID) []byte {
	return binary.AppendUvarint([]byte{markerNotLeader}, uint64(leader))
}

// partitionMachine is a partition's state machine with the marker and election requests
// (cluster_elect.go) served beside replpart's pulls.
type partitionMachine struct {
	*replpart.Machine
	b *Broker
	p *partitionRT
}

func (m *partitionMachine) ServeRequest(from multiraft.NodeID, req []byte) ([]byte, error) {
	if len(req) > 0 && req[0] == markerRequestTag {
		ctx, cancel := context.WithTimeout(context.Background(), markerTimeout)
		defer cancel()
		return m.b.serveMarker(ctx, m.p, req)
	}
	if len(req) == 1 && req[0] == electRequestTag {
		return m.b.serveElect(context.Background(), m.p), nil
	}
	return m.Machine.ServeRequest(from, req)
}

// serveMarker writes one marker on the partition's leader: once the producer's admitted
// batches are appended, proposed to the group, answered once committed and applied. A
// marker whose sequence this replica has applied already is done without a proposal.
func (b *Broker) serveMarker(ctx context.Context, p *partitionRT, req []byte) ([]byte, error) {
	m, err := decodeMarkerRequest(req)
	if err != nil {
		return nil, err
	}
	h := p.repl.Load()
	if h == nil {
		return notLeaderAnswer(0), nil
	}
	if leader, _ := h.part.Leader(); leader != b.cluster.node {
		return notLeaderAnswer(leader), nil
	}
	tp := &p.txn
	tp.mu.Lock()
	for tp.appending[m.pid] > 0 {
		tp.cond().Wait()
	}
	if last, ok := tp.seq[m.pid]; ok && !seqAfter(m.seq, last.seq) {
		tp.mu.Unlock()
		return []byte{markerDone}, nil
	}
	// From now on this leader admits no batch of the producer on a view of the records
	// older than this transaction's end (cluster_txn_verify.go).
	if end, ok := tp.ending[m.pid]; !ok || seqAfter(m.seq, end) {
		if tp.ending == nil {
			tp.ending = map[int64]int32{}
		}
		tp.ending[m.pid] = m.seq
	}
	tp.mu.Unlock()
	raw, err := batch.BuildMarker(m.pid, m.epoch, m.commit, m.seq, b.now().UnixMilli())
	if err != nil {
		return nil, err
	}
	res, err := h.part.Append(ctx, [][]byte{raw})
	if err != nil {
		var nl *replpart.NotLeaderError
		if errors.As(err, &nl) {
			return notLeaderAnswer(nl.Leader), nil
		}
		return nil, fmt.Errorf("marker of producer %d in %s/%d: %w", m.pid, p.topic, p.index, err)
	}
	if res[0].Err != nil {
		return nil, fmt.Errorf("marker of producer %d in %s/%d: %w", m.pid, p.topic, p.index, res[0].Err)
	}
	return []byte{markerDone}, nil
}

// writeClusterMarkers has every partition's leader write the marker, in parallel.
// Partitions deleted since are skipped.
func (b *Broker) writeClusterMarkers(ctx context.Context, pid int64, epoch int16, commit bool, seq int32, parts []txn.Partition) error {
	ctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	req := markerRequest{pid: pid, epoch: epoch, commit: commit, seq: seq}.encode()
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, tp := range parts {
		wg.Go(func() { errs[i] = b.clusterMarker(ctx, tp, req) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// clusterMarker has one partition's leader write the marker: the leader this node knows
// first, else each replica in turn, following the leader a follower names.
func (b *Broker) clusterMarker(ctx context.Context, tp txn.Partition, req []byte) error {
	ct := b.cluster.meta.State().Topics[tp.Topic]
	if ct == nil || tp.Partition < 0 || int(tp.Partition) >= len(ct.Partitions) {
		return nil // deleted: nothing left to mark
	}
	cp := ct.Partitions[tp.Partition]
	var local *partitionRT
	var target multiraft.NodeID
	if _, p, err := b.streams.partition(tp.Topic, tp.Partition); err == nil {
		local = p
		if h := p.repl.Load(); h != nil {
			target, _ = h.part.Leader()
		}
	}
	next := 0
	var last error
	for {
		if target == 0 {
			target = cp.Replicas[next%len(cp.Replicas)]
			next++
		}
		var ans []byte
		var err error
		if target == b.cluster.node {
			if local == nil {
				err = fmt.Errorf("%s/%d is not open here", tp.Topic, tp.Partition)
			} else {
				ans, err = b.serveMarker(ctx, local, req)
			}
		} else {
			ans, err = b.cluster.host.Request(ctx, target, cp.Group, req)
		}
		switch {
		case err == nil && len(ans) == 1 && ans[0] == markerDone:
			return nil
		case err == nil && len(ans) > 1 && ans[0] == markerNotLeader:
			hint, _ := binary.Uvarint(ans[1:])
			if multiraft.NodeID(hint) == target {
				hint = 0
			}
			target, last = multiraft.NodeID(hint), fmt.Errorf("node %d does not lead %s/%d", target, tp.Topic, tp.Partition)
		case err == nil:
			return fmt.Errorf("marker of %s/%d: an answer of %d bytes", tp.Topic, tp.Partition, len(ans))
		default:
			target, last = 0, err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("marker of %s/%d not written: %w", tp.Topic, tp.Partition, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
