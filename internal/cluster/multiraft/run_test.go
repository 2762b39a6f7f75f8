package multiraft_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-mq/sluice/internal/testlog"
)

// liveCluster is hosts on their own Run goroutines over a live network, ticked by time:
// how production drives a host.
type liveCluster struct {
	hosts  []*multiraft.Host
	engs   []*multiraft.MemEngine
	sms    [][]*recorder // sms[i][g-1]: group g's state machine on hosts[i]
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newLiveCluster(tb testing.TB, n, groups int, tick time.Duration, cfg multiraft.Config) *liveCluster {
	return newLiveClusterOn(tb, n, groups, tick, cfg, func(multiraft.NodeID) multiraft.Engine { return multiraft.NewMemEngine() })
}

// newLiveClusterOn is newLiveCluster with every node's engine made by newEngine (engs
// lists the MemEngines among them).
func newLiveClusterOn(tb testing.TB, n, groups int, tick time.Duration, cfg multiraft.Config, newEngine func(multiraft.NodeID) multiraft.Engine) *liveCluster {
	net := memnet.NewLive(1)
	lc := &liveCluster{}
	var ids []multiraft.NodeID
	for i := 1; i <= n; i++ {
		ids = append(ids, multiraft.NodeID(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	lc.cancel = cancel
	for _, id := range ids {
		eng := newEngine(id)
		c := cfg
		c.Node, c.Peers, c.Engine, c.Transport = id, ids, eng, net.Transport(id)
		h, err := multiraft.New(c)
		if err != nil {
			tb.Fatal(err)
		}
		var sms []*recorder
		for g := 1; g <= groups; g++ {
			sms = append(sms, &recorder{})
			if err := h.CreateGroup(multiraft.GroupID(g), ids, sms[g-1]); err != nil {
				tb.Fatal(err)
			}
		}
		lc.sms = append(lc.sms, sms)
		net.Attach(id, h)
		lc.hosts = append(lc.hosts, h)
		if m, ok := eng.(*multiraft.MemEngine); ok {
			lc.engs = append(lc.engs, m)
		}
	}
	for _, h := range lc.hosts {
		t := multiraft.NewTimeTicker(tick)
		lc.wg.Add(1)
		go func() {
			defer lc.wg.Done()
			defer t.Stop()
			_ = h.Run(ctx, t)
		}()
	}
	tb.Cleanup(lc.stop)
	// n1 leads every group
	for g := 1; g <= groups; g++ {
		if err := lc.hosts[0].Campaign(multiraft.GroupID(g)); err != nil {
			tb.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for g := 1; g <= groups; g++ {
		for {
			st, _ := lc.hosts[0].Status(multiraft.GroupID(g))
			if st.Leader == 1 {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("group %d: no leader in 10s", g)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return lc
}

func (lc *liveCluster) stop() {
	lc.cancel()
	lc.wg.Wait()
	for _, h := range lc.hosts {
		h.Close()
	}
}

// TestProposeWaitsForApply: Propose returns with the entry applied on the proposing node,
// and its errors say why in the host's terms.
func TestProposeWaitsForApply(t *testing.T) {
	lc := newLiveCluster(t, 3, 1, 5*time.Millisecond, multiraft.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := lc.hosts[0].Propose(ctx, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	// The state machine has it: raft's own Status().Applied may lag a moment behind, as
	// it moves only when the round advances (a leader applies and answers entries synced
	// earlier before its round's sync: ready.go's applyEarly).
	ents := lc.sms[0][0].entries()
	if len(ents) == 0 || ents[len(ents)-1].Index < idx {
		t.Fatalf("Propose returned index %d before applying it (the state machine holds %d entries)", idx, len(ents))
	}
	var nl *multiraft.NotLeaderError
	if _, err := lc.hosts[1].Propose(ctx, 1, []byte("y")); !errors.As(err, &nl) || nl.Leader != 1 {
		t.Fatalf("propose on a follower: %v, want NotLeaderError naming node 1", err)
	}
	if _, err := lc.hosts[0].Propose(ctx, 99, []byte("y")); !errors.Is(err, multiraft.ErrGroupUnknown) {
		t.Fatalf("propose to an unknown group: %v", err)
	}
	done, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if _, err := lc.hosts[0].Propose(done, 1, []byte("z")); !errors.Is(err, context.Canceled) {
		t.Fatalf("propose with a done context: %v", err)
	}
	if _, err := lc.hosts[0].ChangeMembership(ctx, 1, multiraft.Change{Kind: multiraft.AddLearner, Node: 9}); err != nil {
		t.Fatal(err)
	}
	st, _ := lc.hosts[0].Status(1)
	if fmt.Sprint(st.Learners) != "[9]" {
		t.Fatalf("learners %v after adding node 9", st.Learners)
	}
}

// TestCloseFailsWaiters: a proposal waiting when its host closes gets ErrStopped.
func TestCloseFailsWaiters(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.createGroup(1, c.ids, c.ids)
	_ = c.nodes[1].host.Campaign(1)
	c.tick()
	c.net.Partition([]multiraft.NodeID{1}, []multiraft.NodeID{2, 3})
	p, err := c.nodes[1].host.ProposeAsync(1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	c.tick()
	c.nodes[1].host.Close()
	<-p.Done()
	if _, err := p.Result(); !errors.Is(err, multiraft.ErrStopped) {
		t.Fatalf("waiting proposal after Close: %v", err)
	}
}

// TestMissedQuiesceHeartbeat: a follower that never hears the leader's quiesce heartbeat
// keeps ticking and campaigns; its PreVote wakes the quiet leader, whose lease holds, and
// the group settles under the same leader and term.
func TestMissedQuiesceHeartbeat(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.createGroup(1, c.ids, c.ids)
	_ = c.nodes[1].host.Campaign(1)
	c.tick()
	for range 5 {
		c.tick()
	}
	c.net.SetLink(1, 3, memnet.Faults{Cut: true}) // n3 misses everything from n1 for a while
	for range 5 {
		c.tick()
	}
	s1, _ := c.nodes[1].host.Status(1)
	s3, _ := c.nodes[3].host.Status(1)
	if !s1.Quiesced || s3.Quiesced {
		t.Fatalf("before healing: n1 quiesced %v, n3 quiesced %v; the test needs true, false", s1.Quiesced, s3.Quiesced)
	}
	c.net.Heal()
	for range 60 {
		c.tick()
	}
	for _, id := range c.ids {
		st, _ := c.nodes[id].host.Status(1)
		if st.Leader != 1 || st.Term != 2 || !st.Quiesced {
			t.Errorf("n%d: leader n%d term %d quiesced %v; want n1, term 2, quiesced", id, st.Leader, st.Term, st.Quiesced)
		}
	}
}

// TestProposalOverwrittenBeforeReady: a leader's proposal whose entry a newer leader's
// append overwrites before the host ever took a Ready with it ends with ErrOutcomeUnknown
// (the appends made when it was proposed may have reached someone), rather than waiting
// for ever.
func TestProposalOverwrittenBeforeReady(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{DisableQuiesce: true})
	c.createGroup(1, c.ids, c.ids)
	_ = c.nodes[1].host.Campaign(1)
	c.tick()                                                  // n1 leads term 2; its empty entry is index 2
	p, err := c.nodes[1].host.ProposeAsync(1, []byte("mine")) // index 3, term 2
	if err != nil {
		t.Fatal(err)
	}
	// Before n1's next round, an append from a leader of term 3 takes index 3.
	c.nodes[1].host.Receive(multiraft.Batch{From: 2, To: 1, Messages: []multiraft.Message{{Group: 1,
		Msg: raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Term: 3, LogTerm: 2, Index: 2, Commit: 2,
			Entries: []raftpb.Entry{{Index: 3, Term: 3}}}}}})
	if _, err := c.nodes[1].host.ProcessReady(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
		if _, err := p.Result(); !errors.Is(err, multiraft.ErrOutcomeUnknown) {
			t.Fatalf("overwritten proposal: %v, want ErrOutcomeUnknown", err)
		}
	default:
		t.Fatal("the overwritten proposal is still waiting after the Ready that replaced it")
	}
}

// TestRunStopsOnClose: Run returns ErrStopped once its host is closed, even with no tick
// and no work to wake it otherwise.
func TestRunStopsOnClose(t *testing.T) {
	h, err := multiraft.New(multiraft.Config{Node: 1, Engine: multiraft.NewMemEngine(), Transport: memnet.New(1).Transport(1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(context.Background(), multiraft.NewManualTicker()) }()
	h.Close()
	select {
	case err := <-done:
		if !errors.Is(err, multiraft.ErrStopped) {
			t.Fatalf("Run after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10s after Close")
	}
}

// TestFailedSyncStopsTheHost: after a round fails to sync, the host refuses further rounds
// and proposals with the storage error (raft would panic on a second Ready without an
// Advance), and the proposal that was waiting fails with it.
func TestFailedSyncStopsTheHost(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.createGroup(1, c.ids, c.ids)
	_ = c.nodes[1].host.Campaign(1)
	c.tick()
	h := c.nodes[1].host
	p, err := h.ProposeAsync(1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[1].disk.armCut(0)
	if _, err := h.ProcessReady(); !errors.Is(err, multiraft.ErrInjectedSync) {
		t.Fatalf("round with a failing sync: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("the proposal still waits on a host that can take no more rounds")
	}
	if _, err := p.Result(); !errors.Is(err, multiraft.ErrInjectedSync) {
		t.Fatalf("waiting proposal: %v", err)
	}
	h.Tick()
	if _, err := h.ProcessReady(); !errors.Is(err, multiraft.ErrInjectedSync) {
		t.Fatalf("round after the failure: %v", err)
	}
	if _, err := h.ProposeAsync(1, []byte("y")); !errors.Is(err, multiraft.ErrInjectedSync) {
		t.Fatalf("proposal after the failure: %v", err)
	}
}

// refuser is a state machine that refuses every entry.
type refuser struct{ recorder }

func (*refuser) Apply([]multiraft.Entry) error { return errors.New("refused") }

// TestApplyErrorStopsTheGroup: a state machine that refuses an entry stops its group on
// that node (the proposal waiting there fails with the error, the group neither ticks nor
// answers), and the other replicas carry on.
func TestApplyErrorStopsTheGroup(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{DisableQuiesce: true})
	c.createGroup(1, c.ids[:2], c.ids)
	nd := c.nodes[3]
	nd.sms[1] = &recorder{}
	if err := nd.host.CreateGroup(1, c.ids, &refuser{}); err != nil {
		t.Fatal(err)
	}
	nd.groups = append(nd.groups, 1)
	_ = c.nodes[3].host.Campaign(1)
	c.tick()
	p, err := nd.host.ProposeAsync(1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.await(p, 20) {
		t.Fatal("proposal on the refusing node still waiting")
	}
	if _, err := p.Result(); err == nil || err.Error() != "refused" {
		t.Fatalf("proposal on the refusing node: %v", err)
	}
	before := nd.host.Stats().GroupTicks
	for range 40 {
		c.tick()
	}
	if n := nd.host.Stats().GroupTicks - before; n != 0 {
		t.Fatalf("the stopped group ticked %d times", n)
	}
	// n1 and n2 elect a leader without n3 and go on committing. Two voters
	// can split their votes, and raft draws election timeouts from
	// crypto/rand, so give them up to 300 ticks rather than a fixed 40 (it
	// failed once in CI at 40).
	lead, _ := c.leader(1)
	for i := 0; i < 300 && (lead == 0 || lead == 3); i++ {
		c.tick()
		lead, _ = c.leader(1)
	}
	if lead == 0 || lead == 3 {
		t.Fatalf("leader %d after n3 stopped", lead)
	}
	p, err = c.nodes[lead].host.ProposeAsync(1, []byte("y"))
	if err != nil || !c.await(p, 50) {
		t.Fatalf("proposal on n%d: %v", lead, err)
	}
	if _, err := p.Result(); err != nil {
		t.Fatal(err)
	}
}

// TestOneBatchPerPeerPerRound: a tick's heartbeats of many groups leave a leader as one
// batch per peer node, not one message stream per group.
func TestOneBatchPerPeerPerRound(t *testing.T) {
	const groups = 50
	c := newCluster(t, 1, 3, multiraft.Config{DisableQuiesce: true})
	for g := 1; g <= groups; g++ {
		c.createGroup(multiraft.GroupID(g), c.ids, c.ids)
		_ = c.nodes[1].host.Campaign(multiraft.GroupID(g))
	}
	for range 5 {
		c.tick()
	}
	h := c.nodes[1].host
	before := h.Stats()
	h.Tick()
	if _, err := h.ProcessReady(); err != nil {
		t.Fatal(err)
	}
	after := h.Stats()
	if b, m := after.Batches-before.Batches, after.Messages-before.Messages; b != 2 || m != 2*groups {
		t.Fatalf("one tick of %d groups sent %d batches with %d messages; want 2 batches, %d heartbeats", groups, b, m, 2*groups)
	}
}

// TestSecondConfChangeDropped: raft takes one configuration change at a time; a second
// proposed while the first is pending is replaced by an empty entry, and the host reports
// it dropped (a certainty: this leader never logged it), while the first is applied.
func TestSecondConfChangeDropped(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.createGroup(1, c.ids, c.ids)
	_ = c.nodes[1].host.Campaign(1)
	c.tick()
	h := c.nodes[1].host
	first, err := h.ChangeMembershipAsync(1, multiraft.Change{Kind: multiraft.AddLearner, Node: 7})
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.ChangeMembershipAsync(1, multiraft.Change{Kind: multiraft.AddLearner, Node: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !c.await(first, 20) || !c.await(second, 20) {
		t.Fatal("configuration changes still waiting")
	}
	if _, err := first.Result(); err != nil {
		t.Fatalf("first change: %v", err)
	}
	if _, err := second.Result(); !errors.Is(err, multiraft.ErrProposalDropped) {
		t.Fatalf("second change: %v, want ErrProposalDropped", err)
	}
	if st, _ := h.Status(1); fmt.Sprint(st.Learners) != "[7]" {
		t.Fatalf("learners %v, want [7]", st.Learners)
	}
}

// TestRunObservesEveryRound: Config.ObserveRound hears each Ready round that did work
// (what sluice_raft_ready_round_duration_seconds is made of), with its duration.
func TestRunObservesEveryRound(t *testing.T) {
	var mu sync.Mutex
	var observed int
	var total time.Duration
	cfg := multiraft.Config{ObserveRound: func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		observed++
		total += d
	}}
	lc := newLiveCluster(t, 3, 2, 5*time.Millisecond, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		if _, err := lc.hosts[0].Propose(ctx, multiraft.GroupID(1+i%2), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	lc.stop()
	var rounds uint64
	for _, h := range lc.hosts {
		rounds += h.Stats().Rounds
	}
	mu.Lock()
	defer mu.Unlock()
	// No snapshot was taken, so every round that did work is one Stats counts.
	if uint64(observed) != rounds || rounds < 20 || total <= 0 {
		t.Fatalf("observed %d rounds taking %v in all; the hosts counted %d", observed, total, rounds)
	}
}

// slowSyncEngine is a MemEngine whose Sync takes delay more while slow is set: a disk
// stalling the Ready loop.
type slowSyncEngine struct {
	*multiraft.MemEngine
	slow  atomic.Bool
	delay time.Duration
}

func (e *slowSyncEngine) Sync(written []multiraft.Storage) error {
	if e.slow.Load() {
		time.Sleep(e.delay)
	}
	return e.MemEngine.Sync(written)
}

// TestSlowRoundsAreLogged: a Ready round longer than slowRound (200 ms) is logged with
// where its time went (here the engine's sync, under persist), once per 10 s however many
// there are; rounds shorter are not.
func TestSlowRoundsAreLogged(t *testing.T) {
	var logs testlog.Buffer
	slowNode := &slowSyncEngine{MemEngine: multiraft.NewMemEngine(), delay: 250 * time.Millisecond}
	cfg := multiraft.Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	// Ticks of 50 ms, as in production: a 250 ms stall stays within the election timeout,
	// so node 1 keeps leading and its rounds are the slow ones.
	lc := newLiveClusterOn(t, 3, 1, 50*time.Millisecond, cfg, func(id multiraft.NodeID) multiraft.Engine {
		if id == 1 {
			return slowNode
		}
		return multiraft.NewMemEngine()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	propose := func(n int) {
		t.Helper()
		for range n {
			if _, err := lc.hosts[0].Propose(ctx, 1, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	propose(3)
	if strings.Contains(logs.String(), "Ready round") {
		t.Fatalf("a round was logged slow before any was:\n%s", logs.String())
	}
	slowNode.slow.Store(true)
	propose(3)
	slowNode.slow.Store(false)
	lc.stop()
	var warnings []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "Ready round held every group") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d slow-round warnings for 3 slow rounds within 10 s, want 1:\n%s", len(warnings), logs.String())
	}
	persist := regexp.MustCompile(`persist=(\d+)ms`).FindStringSubmatch(warnings[0])
	if persist == nil {
		t.Fatalf("the warning does not say how long persist took: %s", warnings[0])
	}
	if ms, _ := strconv.Atoi(persist[1]); ms < 250 || !strings.Contains(warnings[0], "readys=") {
		t.Fatalf("the warning does not put the slow sync under persist: %s", warnings[0])
	}
}
