package multiraft_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// idleScenario runs three hosts holding groups 1..groups led by n1 until they quiesce,
// then a proposal on a quiesced group in the middle of a sleep, twice, then n3 killed: what a sleeping host must still do at
// the right tick. It returns one line per tick of what every live host did (groups
// ticked, awake, peers down, batches and messages sent, each group's leader and term),
// and the clock wake-ups (ticks taken) per node after the groups quiesced.
func idleScenario(t *testing.T, sleepy bool) (trace []string, wakeups map[multiraft.NodeID]int) {
	const groups = 20
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.sleepy = sleepy
	// Beats out of phase, as with clocks that do not count from one epoch: n2's host
	// clock one tick ahead, n3's two (and their Sleepers with them, which keeps their beat
	// phase), so their beats arrive between another node's beats, while it sleeps.
	c.nodes[2].host.Tick()
	c.nodes[3].host.Tick()
	c.nodes[3].host.Tick()
	c.nodes[2].clock.off, c.nodes[3].clock.off = 1, 2
	for g := 1; g <= groups; g++ {
		c.createGroup(multiraft.GroupID(g), c.ids, c.ids)
		_ = c.nodes[1].host.Campaign(multiraft.GroupID(g))
	}
	record := func() {
		var line []string
		for _, nd := range c.up() {
			st := nd.host.Stats()
			var roles []string
			for g := 1; g <= groups; g++ {
				s, _ := nd.host.Status(multiraft.GroupID(g))
				roles = append(roles, fmt.Sprintf("%d/%d/%d", s.Leader, s.Term, s.Applied))
			}
			line = append(line, fmt.Sprintf("n%d ticks %d awake %d down %d batches %d msgs %d groups %s",
				nd.id, st.GroupTicks, st.Awake, st.PeersDown, st.Batches, st.Messages, strings.Join(roles, " ")))
		}
		trace = append(trace, fmt.Sprintf("tick %d: %s", c.ticks, strings.Join(line, "; ")))
	}
	for range 30 {
		c.tick()
		record()
	}
	for _, nd := range c.up() {
		if st := nd.host.Stats(); st.Awake != 0 {
			t.Fatalf("sleepy=%v: n%d has %d groups awake after 30 ticks; the scenario needs them quiesced", sleepy, nd.id, st.Awake)
		}
	}
	fired := map[multiraft.NodeID]int{}
	for _, nd := range c.up() {
		fired[nd.id] = nd.clock.fired
	}
	var props []*multiraft.Proposal
	for i := range 60 {
		switch i {
		case 5, 33: // after tick 35 and 63: mid-sleep (the beats are at multiples of 4)
			p, err := c.nodes[1].host.ProposeAsync(multiraft.GroupID(3+i/10), []byte(fmt.Sprint("at ", c.ticks)))
			if err != nil {
				t.Fatal(err)
			}
			props = append(props, p)
		case 45:
			c.kill(3)
		}
		c.tick()
		record()
	}
	for _, p := range props {
		if _, err := p.Result(); err != nil {
			t.Fatalf("sleepy=%v: proposal: %v", sleepy, err)
		}
	}
	wakeups = map[multiraft.NodeID]int{}
	for _, nd := range c.nodes {
		wakeups[nd.id] = nd.clock.fired - fired[nd.id]
	}
	return trace, wakeups
}

// TestSleepingHostDoesWhatATickingHostDoes: hosts driven as Run drives them with a Sleeper
// (woken only at the ticks they ask for) do, tick by tick, exactly what hosts ticked every
// tick do on the same schedule: the same group ticks, the same liveness beats, a proposal
// on a quiesced group committed at the same tick, a dead peer counted down at the same
// tick. And they ask for far fewer ticks: none but the liveness beats' while every group
// is quiesced. It fails if a sleeping host skips a tick it needs (a peer's timeout), if a
// batch received in a sleep is stamped with the host's stale clock (the peer then counts
// as down early), or if the hosts never sleep.
func TestSleepingHostDoesWhatATickingHostDoes(t *testing.T) {
	ticking, _ := idleScenario(t, false)
	sleeping, wakeups := idleScenario(t, true)
	for i := range max(len(ticking), len(sleeping)) {
		if i >= len(ticking) || i >= len(sleeping) || ticking[i] != sleeping[i] {
			t.Fatalf("first difference:\n ticking: %s\nsleeping: %s", at(ticking, i), at(sleeping, i))
		}
	}
	if !strings.Contains(sleeping[len(sleeping)-1], "down 1") {
		t.Fatalf("n3's death not seen: %s", sleeping[len(sleeping)-1])
	}
	// 60 ticks: 15 beats, a few ticks more around the two proposals (their groups tick
	// until they quiesce again) and n3's death (the beat to a dead peer is still due, and
	// the survivors wake at its timeout).
	for id, n := range wakeups {
		if n > 30 {
			t.Errorf("n%d took %d of 60 ticks while its groups were quiesced but for two proposals; want about 30 at most", id, n)
		}
	}
	t.Logf("ticks taken in 60: %v", wakeups)
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// TestAllQuiescedHostTakesOnlyBeats: a host whose every group is quiesced asks for the
// liveness beat's ticks only (one in LivenessTicks), and each of its peers still hears a
// beat from it every LivenessTicks.
func TestAllQuiescedHostTakesOnlyBeats(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.sleepy = true
	for g := 1; g <= 10; g++ {
		c.createGroup(multiraft.GroupID(g), c.ids, c.ids)
		_ = c.nodes[1].host.Campaign(multiraft.GroupID(g))
	}
	for range 30 {
		c.tick()
	}
	before := map[multiraft.NodeID]int{}
	for _, nd := range c.up() {
		before[nd.id] = nd.clock.fired
	}
	sent := c.net.Stats().Sent
	for range 40 {
		c.tick()
	}
	for _, nd := range c.up() {
		if n := nd.clock.fired - before[nd.id]; n != 10 {
			t.Errorf("n%d took %d of 40 ticks with every group quiesced; want 10 (a beat every 4)", nd.id, n)
		}
		if st := nd.host.Stats(); st.PeersDown != 0 || st.Awake != 0 {
			t.Errorf("n%d: %d peers down, %d groups awake", nd.id, st.PeersDown, st.Awake)
		}
	}
	if n := c.net.Stats().Sent - sent; n != 3*2*10 {
		t.Errorf("%d batches in 40 ticks; want 60, 3 nodes beating 2 peers every 4 ticks", n)
	}
}

// fakeSleeper is a Sleeper the test moves: Until reports each tick Run asks for.
type fakeSleeper struct {
	mu    sync.Mutex
	now   uint64
	c     chan time.Time
	until chan uint64
}

func newFakeSleeper() *fakeSleeper {
	return &fakeSleeper{c: make(chan time.Time), until: make(chan uint64, 64)}
}

func (f *fakeSleeper) C() <-chan time.Time { return f.c }
func (f *fakeSleeper) Stop()               {}
func (f *fakeSleeper) Now() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}
func (f *fakeSleeper) Until(n uint64) { f.until <- n }

func (f *fakeSleeper) set(n uint64) {
	f.mu.Lock()
	f.now = n
	f.mu.Unlock()
}

// next is the next tick Run asks for (Run asks only when the tick it wants changes: once
// after each tick it takes, once when woken mid-sleep). The 10 s are a bound on a hang,
// not a timing.
func (f *fakeSleeper) next(t *testing.T) uint64 {
	t.Helper()
	select {
	case n := <-f.until:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("Run asked for no tick in 10 s")
		return 0
	}
}

// TestRunSleepsWhileQuiesced: Run with a Sleeper asks for every tick while its group is
// awake, for the next liveness beat only once it quiesced, and for the very next tick
// again when a proposal wakes the group mid-sleep, which commits without waiting for any
// tick.
func TestRunSleepsWhileQuiesced(t *testing.T) {
	h, err := multiraft.New(multiraft.Config{Node: 1, Engine: multiraft.NewMemEngine(), Transport: memnet.New(1).Transport(1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CreateGroup(1, []multiraft.NodeID{1}, &recorder{}); err != nil {
		t.Fatal(err)
	}
	_ = h.Campaign(1)
	f := newFakeSleeper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx, f) }()
	defer func() {
		cancel()
		<-done
	}()
	// Awake, Run asks for each next tick. (No peers: TestSleepingHostDoesWhatATickingHostDoes
	// has the beats and the timeouts.)
	var asked []uint64
	for tick := uint64(1); ; tick++ {
		n := f.next(t)
		asked = append(asked, n)
		if n != tick {
			break
		}
		if tick > 30 {
			t.Fatalf("Run asked for every tick up to %d: %v", tick, asked)
		}
		f.set(tick)
		f.c <- time.Time{}
	}
	last := asked[len(asked)-1]
	if base := uint64(len(asked) - 1); last%4 != 0 || last <= base+1 {
		t.Fatalf("quiesced after tick %d, Run asked for tick %d; want the next beat's (a multiple of 4): %v", base, last, asked)
	}
	if st := h.Stats(); st.Awake != 0 {
		t.Fatalf("asleep with %d groups awake", st.Awake)
	}
	// Mid-sleep, time moves on without a tick taken, and a proposal wakes the group.
	f.set(last - 2)
	p, err := h.ProposeAsync(1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a proposal on a sleeping host's only group not committed without a tick")
	}
	if _, err := p.Result(); err != nil {
		t.Fatal(err)
	}
	if n := f.next(t); n != last-1 {
		t.Fatalf("woken mid-sleep at tick %d, Run asked for tick %d; want %d, the next", last-2, n, last-1)
	}
	if !slices.IsSorted(asked) {
		t.Fatalf("ticks asked out of order: %v", asked)
	}
}

// TestBeatsFallOnTheClocksMultiples: a host's liveness beats fall on its Sleeper's
// multiples of LivenessTicks, whenever the host started; so nodes whose Sleepers count from
// one epoch (NewTimeTicker's: the Unix epoch) beat at the same ticks, and each hears its
// peers' beats when it is awake for its own. Here n3 restarts two ticks past a multiple of
// 4 (its host's own count starts again at 0): once the groups are quiet again, every batch
// of the cluster leaves at a multiple of 4.
func TestBeatsFallOnTheClocksMultiples(t *testing.T) {
	c := newCluster(t, 1, 3, multiraft.Config{})
	c.sleepy = true
	for g := 1; g <= 5; g++ {
		c.createGroup(multiraft.GroupID(g), c.ids, c.ids)
		_ = c.nodes[1].host.Campaign(multiraft.GroupID(g))
	}
	for range 30 {
		c.tick()
	}
	c.kill(3)
	for c.ticks%4 != 2 {
		c.tick()
	}
	c.restart(3)
	for range 40 {
		c.tick()
	}
	var off []uint64
	for range 40 {
		sent := c.net.Stats().Sent
		c.tick()
		if c.net.Stats().Sent != sent && c.ticks%4 != 0 {
			off = append(off, c.ticks)
		}
	}
	for _, nd := range c.up() {
		if st := nd.host.Stats(); st.Awake != 0 || st.PeersDown != 0 {
			t.Fatalf("n%d: %d groups awake, %d peers down; the test needs a quiet cluster", nd.id, st.Awake, st.PeersDown)
		}
	}
	if len(off) > 0 {
		t.Fatalf("batches sent at ticks %v, off the multiples of 4", off)
	}
}

// TestTimeTickerCountsFromTheEpoch: NewTimeTicker's tick n is the n-th multiple of d since
// the Unix epoch, whenever the ticker was made.
func TestTimeTickerCountsFromTheEpoch(t *testing.T) {
	const d = 50 * time.Millisecond
	tk := multiraft.NewTimeTickerForTest(d)
	defer tk.Stop()
	before := uint64(time.Now().UnixNano() / int64(d))
	n := tk.Now()
	after := uint64(time.Now().UnixNano() / int64(d))
	if n < before || n > after {
		t.Fatalf("Now() = %d; the wall clock's multiples of %v were %d and %d around it", n, d, before, after)
	}
}
