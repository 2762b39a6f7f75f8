package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/wire"
)

// A replicated partition's checkpoint (its Raft snapshot's part that the broker owns) says
// where a replica's log comes back to, and what the replica decides the entries after it
// with: the idempotent producers' last batches and the transactions (open, aborted, each
// producer's last marker sequence).
//
// Every replica decides at apply, from that state, whether a producer's batch is a
// duplicate, a gap or fenced, and whether a marker is stale, so the state must be the same
// on every replica at every entry. Replicas that never stop keep it in memory; one that
// restores a checkpoint — after a restart, or filled from a peer as a new replica — used to
// rebuild it from its log: a scan bounded to the last producer.ScanOffsets offsets when it
// had no local snapshot at or below the checkpoint (a new replica never has one; a graceful
// stop wrote it at the log's end, past the checkpoint unless that was at the end too), and
// never what retention or a DeleteRecords had removed (a
// producer whose marker was trimmed). Such a replica then appended a retry the others
// answered as a duplicate, or a stale marker the others ignored, and every later offset of
// its log differed from theirs (TestReplicaRestoredDecidesAsTheOthers). Kafka's followers
// copy the leader's bytes and never decide; ours decide, so they carry the state.
//
//	checkpoint: high watermark u64 | log start u64                 (16 bytes; 8 before log starts)
//	          | 'S' | uvarint len | producers (producer.State.Encode) | transactions (txnPartition.encodeLocked)
//
// The state is written only once every node reads it (meta.LevelPartitionState): an older
// binary refuses a checkpoint longer than 16 bytes, which would stop its replica of the
// group. A checkpoint without it is restored as before, by the scan.
//
// Once the level admits the state, a partition that is written to checkpoints with it at
// its next entry (replpart.CheckpointAger: the replica's last checkpoint is outdated, so it
// wants a snapshot after any entry). One nobody writes to would keep its old checkpoint,
// and every restart would restore it by the scan: refreshCheckpoints asks for an empty
// entry in its group, which every replica applies and checkpoints after.

// checkpointStateTag starts the state after a checkpoint's offsets.
const checkpointStateTag = 'S'

// maxCheckpointProducerBytes bounds the length a checkpoint may declare for its producers' part.
const maxCheckpointProducerBytes = 1 << 30

type checkpoint struct {
	hw, start int64
	state     bool   // it carries the producer and transaction state
	producers []byte // producer.State.Encode's
	txns      []byte // txnPartition.encodeLocked's
}

var errBadCheckpoint = errors.New("malformed partition checkpoint")

func decodeCheckpoint(data []byte) (checkpoint, error) {
	var cp checkpoint
	switch {
	case len(data) == 0:
		return cp, nil // the empty log
	case len(data) == 8:
		cp.hw = int64(binary.BigEndian.Uint64(data))
	case len(data) == 16 || len(data) > 16 && data[16] == checkpointStateTag:
		cp.hw, cp.start = int64(binary.BigEndian.Uint64(data)), int64(binary.BigEndian.Uint64(data[8:]))
	default:
		return cp, fmt.Errorf("%w: %d bytes", errBadCheckpoint, len(data))
	}
	if cp.hw < 0 || cp.start < 0 || cp.start > cp.hw {
		return cp, fmt.Errorf("%w: high watermark %d and log start %d", errBadCheckpoint, cp.hw, cp.start)
	}
	if len(data) > 16 {
		d := wire.Decoder{B: data[17:], Bad: errBadCheckpoint}
		cp.state, cp.producers, cp.txns = true, d.Bytes(maxCheckpointProducerBytes), d.B
		if d.Err != nil {
			return cp, d.Err
		}
	}
	return cp, nil
}

// encodeCheckpoint is the log's checkpoint now, with the state if withState. Called on
// the group's Ready loop, between entries: the state is that of every applied entry.
func (r *replicaLog) encodeCheckpoint(withState bool) []byte {
	p := r.p
	hw := p.log.HighWatermark()
	cp := binary.BigEndian.AppendUint64(nil, uint64(hw))
	cp = binary.BigEndian.AppendUint64(cp, uint64(p.log.LogStartOffset()))
	if !withState {
		return cp
	}
	prods := p.prod.Encode(nil, hw)
	cp = binary.AppendUvarint(append(cp, checkpointStateTag), uint64(len(prods)))
	cp = append(cp, prods...)
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	return p.txn.encodeLocked(cp)
}

// restoreState puts a checkpoint's state in place of the partition's, its log now at the
// checkpoint's high watermark.
func (r *replicaLog) restoreState(cp checkpoint) error {
	p := r.p
	if err := p.prod.Decode(cp.producers, p.log.Gen()); err != nil {
		return err
	}
	tp := &p.txn
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.open, tp.aborted, tp.seq, tp.newestMarker = nil, nil, nil, 0
	return tp.decodeLocked(cp.txns, cp.hw, true)
}

// refreshAskEvery is how long refreshCheckpoints waits before asking a replica's group for
// an entry again while its checkpoint stays outdated (the entry lost with a leader, or the
// checkpoint refused by a full disk); a follower's first ask waits as long, as its
// leader's ask serves it too.
const refreshAskEvery = 30 * time.Second

// refreshAsksPerRound bounds the entries one reconcile round (a second) asks for. Each
// costs every replica of its group a snapshot (its log's fdatasync, and four more to store
// it); after the level rises every partition wants one, and asked all at once they held
// each node's Ready loop for 1.6–3.3 s with 1,000 partitions (docs/benchmarks.md, "The
// level rise again"). 50 a second per node takes 1,000 partitions led evenly by 3 nodes 7 s.
const refreshAsksPerRound = 50

// refreshCheckpoints is the reconcile loop's step that gives every partition replica here
// whose last checkpoint lacks the state the feature level admits an entry to checkpoint
// after: an empty one (multiraft.Host.ProposeEmpty), asked for by the group's leader
// (a follower only if that did not serve it), that every replica applies. Once after the
// level rises, and for a replica that restored an old checkpoint since; nothing otherwise.
func (c *clusterRT) refreshCheckpoints() {
	if !c.checkpointsCarryState() {
		return
	}
	var outdated []refreshCandidate
	for _, t := range c.b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			h := p.repl.Load()
			if h == nil || !h.log.CheckpointOutdated() {
				continue
			}
			st, err := c.host.Status(h.group)
			outdated = append(outdated, refreshCandidate{log: h.log, group: h.group, leads: err == nil && st.Leader == c.node})
		}
	}
	for _, g := range chooseRefreshes(outdated, time.Now(), refreshAsksPerRound) {
		if err := c.host.ProposeEmpty(g); err != nil {
			c.log.Debug("cluster: no entry to checkpoint a partition after; asked again later", "group", uint64(g), "err", err)
		}
	}
}

// refreshCandidate is a partition replica here whose checkpoint is outdated.
type refreshCandidate struct {
	log   *replicaLog
	group multiraft.GroupID
	leads bool // this node leads its group
}

// chooseRefreshes returns the groups of the candidates to ask an entry for now, at most
// limit of them, and marks them asked: a leader never asked, or one asked refreshAskEvery
// ago or more; a follower likewise, except that the first time it is seen it is only
// marked (its leader's entry serves it, and it asks itself only if that did not).
func chooseRefreshes(cands []refreshCandidate, now time.Time, limit int) []multiraft.GroupID {
	var out []multiraft.GroupID
	for _, r := range cands {
		if len(out) == limit {
			break
		}
		asked := r.log.refreshAsked.Load()
		switch {
		case asked != 0 && now.Sub(time.Unix(0, asked)) < refreshAskEvery:
			continue
		case asked == 0 && !r.leads:
			r.log.refreshAsked.Store(now.UnixNano())
			continue
		}
		r.log.refreshAsked.Store(now.UnixNano())
		out = append(out, r.group)
	}
	return out
}

var _ replpart.CheckpointAger = (*replicaLog)(nil)

// CheckpointOutdated reports that the last checkpoint lacks the producer and transaction
// state the feature level now admits (replpart.CheckpointAger).
func (r *replicaLog) CheckpointOutdated() bool {
	return !r.stateKept.Load() && r.withState != nil && r.withState()
}
