package multiraft_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/engine"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// BenchmarkCommitTrace: where one commit's latency goes, the path W1 takes through a
// 3-node cluster without the broker around it. Three hosts in one process, each on
// raftstore on the real disk (b.TempDir()) and tcptransport over loopback, n1 leading;
// 256 proposers of 1 KiB entries over the groups. Every stage of every entry is stamped
// by wrappers around the engine, the transport and the state machine (multiraft itself is
// untouched), and the benchmark prints p50/p99 of each:
//
//	propose → leader append         the proposal waits for a Ready round to take it
//	propose → MsgApp sent           the leader's append leaves for the followers
//	leader append → leader synced   the leader's write + fsync (one Engine.Sync)
//	MsgApp sent → follower got it   the transport
//	follower got → follower synced  its Ready round: write + fsync
//	follower synced → resp sent     its answer leaves after the sync
//	resp sent → leader got resp     the transport back
//	quorum → applied on leader      the leader's own sync and the first follower's
//	                                answer are both in; then its next round applies
//	applied → answered              the proposer's wake-up
//
//	go test -run '^$' -bench CommitTrace -benchtime 20000x ./internal/cluster/multiraft/
//
// Two shapes: 256 proposers of 1 KiB (many entries per round), and W1's own through
// franz-go: an idempotent producer keeps one produce request in flight per broker, so a
// partition's leader sees one entry at a time of everything the client buffered meanwhile
// (W1 measured about 96 records of 1 KiB per request): one proposer of 96 KiB entries.
//
//	go test -run '^$' -bench 'CommitTrace/proposers=1' -benchtime 2000x ./internal/cluster/multiraft/
func BenchmarkCommitTrace(b *testing.B) {
	for _, c := range []struct{ groups, proposers, size int }{{1, 256, 1 << 10}, {8, 256, 1 << 10}, {1, 1, 96 << 10}} {
		b.Run(fmt.Sprintf("groups=%d/proposers=%d/size=%d", c.groups, c.proposers, c.size), func(b *testing.B) {
			benchCommitTrace(b, c.groups, c.proposers, c.size)
		})
	}
}

// stamps are the times of one stage, by (group, index).
type stamps map[[2]uint64]time.Time

// tracer records every stage's first time for every entry.
type tracer struct {
	mu sync.Mutex
	st map[string]stamps
	// appended since each node's last Sync, and the highest index each follower's
	// answers covered (per node and group) when sent and when received
	unsynced map[multiraft.NodeID][][2]uint64
	acked    map[string]uint64
}

func (t *tracer) stamp(stage string, g, i uint64, at time.Time) {
	m := t.st[stage]
	if m == nil {
		m = stamps{}
		t.st[stage] = m
	}
	if _, ok := m[[2]uint64{g, i}]; !ok {
		m[[2]uint64{g, i}] = at
	}
}

// upTo stamps every index after the last one stamped under key, up to i.
func (t *tracer) upTo(stage, key string, g, i uint64, at time.Time) {
	k := fmt.Sprintf("%s/%d", key, g)
	for j := t.acked[k] + 1; j <= i; j++ {
		t.stamp(stage, g, j, at)
	}
	t.acked[k] = max(t.acked[k], i)
}

// traceEngine stamps a node's appends and the syncs that made them durable.
type traceEngine struct {
	multiraft.Engine
	t    *tracer
	node multiraft.NodeID
}

type traceStorage struct {
	multiraft.Storage
	e *traceEngine
	g uint64
}

func (e *traceEngine) Group(g multiraft.GroupID) (multiraft.Storage, error) {
	st, err := e.Engine.Group(g)
	return &traceStorage{st, e, uint64(g)}, err
}

func (e *traceEngine) Sync(written []multiraft.Storage) error {
	inner := make([]multiraft.Storage, len(written))
	for i, w := range written {
		inner[i] = w.(*traceStorage).Storage
	}
	e.t.mu.Lock()
	pending := e.t.unsynced[e.node]
	e.t.unsynced[e.node] = nil
	e.t.mu.Unlock()
	err := e.Engine.Sync(inner)
	now := time.Now()
	e.t.mu.Lock()
	for _, k := range pending {
		e.t.stamp(fmt.Sprintf("n%d synced", e.node), k[0], k[1], now)
	}
	e.t.mu.Unlock()
	return err
}

func (s *traceStorage) Append(ents []raftpb.Entry) error {
	now := time.Now()
	s.e.t.mu.Lock()
	for _, e := range ents {
		s.e.t.stamp(fmt.Sprintf("n%d append", s.e.node), s.g, e.Index, now)
		s.e.t.unsynced[s.e.node] = append(s.e.t.unsynced[s.e.node], [2]uint64{s.g, e.Index})
	}
	s.e.t.mu.Unlock()
	return s.Storage.Append(ents)
}

// traceTransport stamps appends and their answers as a node sends them.
type traceTransport struct {
	multiraft.Transport
	t *tracer
}

func (tr traceTransport) Send(b multiraft.Batch) {
	now := time.Now()
	tr.t.mu.Lock()
	for _, m := range b.Messages {
		tr.t.note("sent", b.From, m, now)
	}
	tr.t.mu.Unlock()
	tr.Transport.Send(b)
}

// traceReceiver stamps what a host receives.
type traceReceiver struct {
	h *multiraft.Host
	t *tracer
}

func (r traceReceiver) Receive(b multiraft.Batch) {
	now := time.Now()
	r.t.mu.Lock()
	for _, m := range b.Messages {
		r.t.note("got", b.To, m, now)
	}
	r.t.mu.Unlock()
	r.h.Receive(b)
}

func (t *tracer) note(what string, at multiraft.NodeID, m multiraft.Message, now time.Time) {
	switch {
	case m.Msg.Type == raftpb.MsgApp && m.Msg.From == 1:
		for _, e := range m.Msg.Entries {
			t.stamp(fmt.Sprintf("app %s n%d", what, m.Msg.To), uint64(m.Group), e.Index, now)
		}
	case m.Msg.Type == raftpb.MsgAppResp && m.Msg.To == 1 && !m.Msg.Reject:
		stage := fmt.Sprintf("resp %s n%d", what, m.Msg.From)
		t.upTo(stage, stage, uint64(m.Group), m.Msg.Index, now)
	}
	_ = at
}

// stampSM stamps the leader's applies and keeps nothing.
type stampSM struct {
	t     *tracer
	g     uint64
	node  multiraft.NodeID
	count atomic.Int64
}

func (s *stampSM) Apply(ents []multiraft.Entry) error {
	if s.node == 1 {
		now := time.Now()
		s.t.mu.Lock()
		for _, e := range ents {
			s.t.stamp("applied", s.g, e.Index, now)
		}
		s.t.mu.Unlock()
	}
	s.count.Add(int64(len(ents)))
	return nil
}
func (s *stampSM) Snapshot() ([]byte, error) { return nil, nil }
func (s *stampSM) Restore([]byte) error      { return nil }

func benchCommitTrace(b *testing.B, groups, proposers, size int) {
	root := b.TempDir()
	tr := &tracer{st: map[string]stamps{}, unsynced: map[multiraft.NodeID][][2]uint64{}, acked: map[string]uint64{}}
	ids := []multiraft.NodeID{1, 2, 3}
	lns := map[multiraft.NodeID]net.Listener{}
	addrs := map[multiraft.NodeID]string{}
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[id], addrs[id] = ln, ln.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var hosts []*multiraft.Host
	for _, id := range ids {
		e, err := engine.Open(engine.Options{Node: id, Store: raftstore.Options{
			FS: vfs.Default, Dir: filepath.Join(root, fmt.Sprintf("n%d", id))}})
		if err != nil {
			b.Fatal(err)
		}
		peers := map[multiraft.NodeID]string{}
		for _, p := range ids {
			if p != id {
				peers[p] = addrs[p]
			}
		}
		t, err := tcptransport.New(tcptransport.Config{Node: id, ClusterID: "trace", Peers: peers,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		h, err := multiraft.New(multiraft.Config{Node: id, Peers: ids, Engine: &traceEngine{e, tr, id},
			Transport: traceTransport{t, tr}})
		if err != nil {
			b.Fatal(err)
		}
		for g := 1; g <= groups; g++ {
			if err := h.CreateGroup(multiraft.GroupID(g), ids, &stampSM{t: tr, g: uint64(g), node: id}); err != nil {
				b.Fatal(err)
			}
		}
		t.Serve(lns[id], traceReceiver{h, tr})
		hosts = append(hosts, h)
		tick := multiraft.NewTimeTicker(50 * time.Millisecond)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer tick.Stop()
			_ = h.Run(ctx, tick)
		}()
		b.Cleanup(func() { _ = t.Close(); _ = e.Close() })
	}
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, h := range hosts {
			h.Close()
		}
	})
	for g := 1; g <= groups; g++ {
		_ = hosts[0].Campaign(multiraft.GroupID(g))
	}
	for g := 1; g <= groups; g++ {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if st, _ := hosts[0].Status(multiraft.GroupID(g)); st.Leader == 1 && st.Role.String() == "StateLeader" {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("group %d: no leader in 10s", g)
			}
		}
	}
	type done struct {
		g, i   uint64
		t0, t1 time.Time
	}
	res := make([][]done, proposers)
	data := make([]byte, size)
	var next, failed atomic.Int64
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer pcancel()
	before := hosts[0].Stats()
	b.ResetTimer()
	start := time.Now()
	var pw sync.WaitGroup
	for w := range proposers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				g := uint64(1 + (int(n)+w)%groups)
				t0 := time.Now()
				i, err := hosts[0].Propose(pctx, multiraft.GroupID(g), data)
				if err != nil {
					failed.Add(1)
					continue
				}
				res[w] = append(res[w], done{g, i, t0, time.Now()})
			}
		}()
	}
	pw.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after := hosts[0].Stats()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d proposals failed", f)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	stages := map[string][]time.Duration{}
	add := func(name string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			stages[name] = append(stages[name], to.Sub(from))
		}
	}
	for _, rs := range res {
		for _, r := range rs {
			k := [2]uint64{r.g, r.i}
			get := func(stage string) time.Time { return tr.st[stage][k] }
			// the follower whose answer reached the leader first made the quorum
			f := 2
			if g3 := get("resp got n3"); !g3.IsZero() && (get("resp got n2").IsZero() || g3.Before(get("resp got n2"))) {
				f = 3
			}
			fs := func(s string) string { return fmt.Sprintf(s, f) }
			quorum := get("n1 synced")
			if q := get(fs("resp got n%d")); q.After(quorum) {
				quorum = q
			}
			add("1 propose → leader append", r.t0, get("n1 append"))
			add("2 propose → MsgApp sent", r.t0, get(fs("app sent n%d")))
			add("3 leader append → leader synced", get("n1 append"), get("n1 synced"))
			add("4 MsgApp sent → follower got it", get(fs("app sent n%d")), get(fs("app got n%d")))
			add("5 follower got → follower synced", get(fs("app got n%d")), get(fs("n%d synced")))
			add("6 follower synced → resp sent", get(fs("n%d synced")), get(fs("resp sent n%d")))
			add("7 resp sent → leader got resp", get(fs("resp sent n%d")), get(fs("resp got n%d")))
			add("8 quorum → applied on leader", quorum, get("applied"))
			add("9 applied → answered", get("applied"), r.t1)
			add("  propose → answered (total)", r.t0, r.t1)
			if get("n1 synced").After(get(fs("resp got n%d"))) {
				stages["  leader's sync was last"] = append(stages["  leader's sync was last"], 0)
			}
		}
	}
	names := make([]string, 0, len(stages))
	for n := range stages {
		names = append(names, n)
	}
	slices.Sort(names)
	total := len(stages["  propose → answered (total)"])
	// printed, not logged: the benchmark's log keeps 10 lines, of its first (b.N = 1) run
	logf := func(f string, a ...any) {
		if b.N > 1 {
			fmt.Printf(f+"\n", a...)
		}
	}
	logf("groups=%d: %d proposals in %v: %.0f/s; n1: %d rounds, %d syncs, %.1f proposals per sync",
		groups, b.N, elapsed.Round(time.Millisecond), float64(b.N)/elapsed.Seconds(),
		after.Rounds-before.Rounds, after.Syncs-before.Syncs, float64(b.N)/float64(max(after.Syncs-before.Syncs, 1)))
	for _, n := range names {
		d := stages[n]
		if n == "  leader's sync was last" {
			logf("%-36s %5.1f%% of commits", n, 100*float64(len(d))/float64(max(total, 1)))
			continue
		}
		slices.Sort(d)
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		logf("%-36s p50 %7.3f ms  p99 %7.3f ms  mean %7.3f ms", n,
			ms(d[len(d)/2]), ms(d[len(d)*99/100]), ms(sum/time.Duration(len(d))))
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
