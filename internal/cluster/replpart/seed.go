package replpart

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// ErrBehind is matched (errors.Is) by every *BehindError.
var ErrBehind = errors.New("replpart: local log behind the checkpoint")

// BehindError is what Log.Restore answers when the local log ends before the checkpoint:
// the records [From, To) are below the snapshot, in no Raft entry this replica will be
// sent, and must be pulled from a peer. (A new replica, a wiped local log, a follower
// sent a snapshot because the Raft log was compacted past it.)
type BehindError struct{ From, To int64 }

func (e *BehindError) Error() string {
	return fmt.Sprintf("replpart: local log lacks offsets %d..%d of its checkpoint", e.From, e.To)
}

func (e *BehindError) Is(target error) bool { return target == ErrBehind }

// ErrNoSource: no peer could hand over a range this replica lacks (none holds it, none
// answered). Restore fails with it, and the group stops on this node.
var ErrNoSource = errors.New("replpart: no peer holds the records this replica lacks")

// Source is where a Machine pulls the records its checkpoint names and its local log
// lacks: the peers of its group, through the host's requests. Zero values take the
// defaults in parentheses.
type Source struct {
	Host  *multiraft.Host
	Group multiraft.GroupID
	// Peers are the group's replicas to try (this node's own id is skipped). The group's
	// leader, then its voters and learners as the host sees them, are tried first.
	Peers []multiraft.NodeID
	// ChunkBytes is the most record bytes asked for at once (1 MiB; at most MaxPullChunk):
	// what a pull holds in memory.
	ChunkBytes int
	// Timeout bounds one chunk's request (10s): a peer that does not answer in time is
	// left for the next.
	Timeout time.Duration
	// Rounds is how many times every peer is tried in a row without progress before the
	// pull gives up with ErrNoSource (3), with Backoff (200ms) between rounds.
	Rounds  int
	Backoff time.Duration
}

// PullStats count what a Machine's pulls did, for metrics: Target and At say how far the
// pull under way is (both 0 when none is).
type PullStats struct {
	Pulls, Chunks, Bytes, Failures uint64
	At, Target                     int64
}

type pullCounters struct {
	pulls, chunks, bytes, failures atomic.Uint64
	at, target                     atomic.Int64
}

// SetSource lets the machine pull records from its peers; call it before the host first
// restores the machine (CreateGroup). Without a source a Restore that finds the local log
// behind its checkpoint fails.
func (m *Machine) SetSource(s Source) {
	if s.ChunkBytes <= 0 {
		s.ChunkBytes = 1 << 20
	}
	s.ChunkBytes = min(s.ChunkBytes, MaxPullChunk)
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Second
	}
	if s.Rounds <= 0 {
		s.Rounds = 3
	}
	if s.Backoff <= 0 {
		s.Backoff = 200 * time.Millisecond
	}
	m.src = &s
}

// PullStats returns the machine's pull counters.
func (m *Machine) PullStats() PullStats {
	c := &m.pulls
	return PullStats{Pulls: c.pulls.Load(), Chunks: c.chunks.Load(), Bytes: c.bytes.Load(),
		Failures: c.failures.Load(), At: c.at.Load(), Target: c.target.Load()}
}

// peers is whom to ask, in order: the leader, the group's members, the configured peers.
func (m *Machine) peers() []multiraft.NodeID {
	s := m.src
	var out []multiraft.NodeID
	add := func(ids ...multiraft.NodeID) {
		for _, id := range ids {
			if id != 0 && uint64(id) != m.node && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	if st, err := s.Host.Status(s.Group); err == nil {
		add(st.Leader)
		add(st.Voters...)
		add(st.Learners...)
	}
	add(s.Peers...)
	return out
}

// pull fetches [from, to) into the local log, a chunk at a time, from whichever peer
// answers: a peer that fails (unreachable, timed out, holding nothing there) is left for
// the next; after Rounds passes over every peer with no progress it gives up.
func (m *Machine) pull(ctx context.Context, from, to int64) error {
	s := m.src
	if s == nil {
		return fmt.Errorf("%w: offsets %d..%d (no source configured)", ErrNoSource, from, to)
	}
	c := &m.pulls
	c.pulls.Add(1)
	c.target.Store(to)
	c.at.Store(from)
	defer func() { c.at.Store(0); c.target.Store(0) }()
	var fails []string
	idle := 0 // failed requests since the last progress
	for cur, i := from, 0; cur < to; {
		peers := m.peers()
		if len(peers) == 0 {
			return fmt.Errorf("%w: offsets %d..%d: the group has no other replica", ErrNoSource, cur, to)
		}
		if idle >= s.Rounds*len(peers) {
			return fmt.Errorf("%w: offsets %d..%d; tried %s", ErrNoSource, cur, to, strings.Join(fails, "; "))
		}
		if idle > 0 && idle%len(peers) == 0 {
			select {
			case <-time.After(s.Backoff):
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("replpart: pull of offsets %d..%d stopped at %d: %w", from, to, cur, err)
		}
		p := peers[i%len(peers)]
		next, err := m.pullChunk(ctx, p, cur, to)
		var local *localError
		switch {
		case errors.As(err, &local):
			return local.err
		case err != nil:
			c.failures.Add(1)
			fails = append(fails, fmt.Sprintf("n%d: %v", p, err))
			if len(fails) > 8 {
				fails = fails[1:]
			}
			idle++
			i++ // the next peer
			continue
		}
		cur, idle = next, 0
		c.at.Store(cur)
	}
	return nil
}

// localError is a pull that failed here (the local log refused the records), not at the
// peer: trying another peer would not help.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }

// pullChunk asks peer p for the records from cur and appends them; it returns where the
// local log now ends.
func (m *Machine) pullChunk(ctx context.Context, p multiraft.NodeID, cur, to int64) (int64, error) {
	s := m.src
	req := pullRequest{From: cur, To: to, Max: s.ChunkBytes}
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	resp, err := s.Host.Request(ctx, p, s.Group, req.encode())
	if err != nil {
		return 0, err
	}
	r, err := decodeRange(resp)
	if err == nil {
		err = checkRange(req, r)
	}
	if err != nil {
		return 0, err
	}
	if err := m.log.AppendRange(cur, r); err != nil {
		return 0, &localError{fmt.Errorf("replpart: append offsets %d..%d pulled from n%d: %w", r.Start, r.Next, p, err)}
	}
	m.pulls.chunks.Add(1)
	m.pulls.bytes.Add(uint64(len(r.Data)))
	return r.Next, nil
}

// ServeRequest answers a peer's pull from the local log, or proposes a peer's cursor skip
// (cursor_skip.go) when this node leads (multiraft.RequestServer). It runs on the
// transport's goroutines, beside the Ready loop: it only reads the log, or proposes.
func (m *Machine) ServeRequest(from multiraft.NodeID, req []byte) ([]byte, error) {
	if len(req) >= 2 && req[0] == pullVersion && req[1] == skipKind {
		return m.serveSkip(req)
	}
	r, err := decodePullRequest(req)
	if err != nil {
		return nil, err
	}
	rg, err := m.log.ReadRange(r.From, r.To, r.Max)
	if err != nil {
		return nil, fmt.Errorf("replpart: read offsets %d..%d for n%d: %w", r.From, r.To, from, err)
	}
	if err := checkRange(r, rg); err != nil {
		// This replica does not hold the range (it is behind itself): the puller asks
		// another.
		return nil, fmt.Errorf("replpart: this replica holds no records at offset %d (its log: %d..%d)", r.From, rg.Start, rg.Next)
	}
	return rg.encode(), nil
}
