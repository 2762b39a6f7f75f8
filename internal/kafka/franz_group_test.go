package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupWatch follows a franz-go consumer group from its members'
// callbacks: who owns which partition and which records arrived. Tests wait
// on its changes, never on time.
type groupWatch struct {
	mu      sync.Mutex
	owners  map[int32]int              // partition → member index
	seen    map[int32]map[int64]string // partition → offset → value
	changed chan struct{}
}

func newGroupWatch() *groupWatch {
	return &groupWatch{owners: map[int32]int{}, seen: map[int32]map[int64]string{}, changed: make(chan struct{}, 1)}
}

func (w *groupWatch) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond (called with mu held) holds.
func (w *groupWatch) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	for {
		w.mu.Lock()
		ok := cond()
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("timed out waiting for %s; owners %v", what, w.owners)
		}
	}
}

// balanced reports whether every partition is owned and each of members
// owns the same number. Called with mu held.
func (w *groupWatch) balanced(parts int, members ...int) bool {
	count := map[int]int{}
	for _, m := range w.owners {
		count[m]++
	}
	if len(w.owners) != parts || len(count) != len(members) {
		return false
	}
	for _, m := range members {
		if count[m] != parts/len(members) {
			return false
		}
	}
	return true
}

func (w *groupWatch) total() int {
	n := 0
	for _, offs := range w.seen {
		n += len(offs)
	}
	return n
}

// member is one consumer of the group, polling on its own goroutine.
type member struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func (n *node) startMember(t *testing.T, w *groupWatch, idx int, group, topic string, opts ...kgo.Opt) *member {
	drop := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		w.mu.Lock()
		for _, p := range m[topic] {
			if w.owners[p] == idx {
				delete(w.owners, p)
			}
		}
		w.mu.Unlock()
		w.notify()
	}
	assigned := func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		w.mu.Lock()
		for _, p := range m[topic] {
			w.owners[p] = idx
		}
		w.mu.Unlock()
		w.notify()
	}
	cl := n.client(append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.OnPartitionsAssigned(assigned), kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			// Commit before counting, so everything counted is committed
			// unless a rebalance refused it (then the revoke commits it).
			_ = cl.CommitUncommittedOffsets(ctx)
			w.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if w.seen[r.Partition] == nil {
					w.seen[r.Partition] = map[int64]string{}
				}
				w.seen[r.Partition][r.Offset] = string(r.Value)
			})
			w.mu.Unlock()
			w.notify()
		}
	}()
	return m
}

// stop leaves the group (committing on the way out) and ends the poller.
func (m *member) stop() {
	m.cancel()
	m.cl.Close()
	<-m.done
}

func produceValues(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i%13), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestFranzGroup runs a group of three over six partitions, rebalances it
// when one member leaves, and resumes from the committed offsets after the
// broker restarts; with franz-go's default cooperative-sticky balancer
// (incremental rebalances) and with the eager range balancer.
func TestFranzGroup(t *testing.T) {
	t.Run("cooperative-sticky", func(t *testing.T) { testFranzGroup(t) })
	t.Run("range", func(t *testing.T) { testFranzGroup(t, kgo.Balancers(kgo.RangeBalancer())) })
}

func testFranzGroup(t *testing.T, opts ...kgo.Opt) {
	n := startNode(t, "")
	const topic, grp, parts = "grp", "g", 6
	n.createTopic(topic, parts)
	prod := n.client()
	produceValues(t, prod, topic, 0, 600)

	w := newGroupWatch()
	ms := []*member{n.startMember(t, w, 0, grp, topic, opts...), n.startMember(t, w, 1, grp, topic, opts...), n.startMember(t, w, 2, grp, topic, opts...)}
	w.waitFor(t, "three members with two partitions each", func() bool { return w.balanced(parts, 0, 1, 2) })
	w.waitFor(t, "600 records", func() bool { return w.total() == 600 })

	ms[2].stop()
	w.mu.Lock()
	for p, m := range w.owners {
		if m == 2 {
			delete(w.owners, p)
		}
	}
	w.mu.Unlock()
	w.waitFor(t, "two members with three partitions each", func() bool { return w.balanced(parts, 0, 1) })
	produceValues(t, prod, topic, 600, 1200)
	w.waitFor(t, "1200 records", func() bool { return w.total() == 1200 })
	ms[0].stop()
	ms[1].stop()

	ctx := testCtx(t, 30*time.Second)
	adm := n.admin()
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, grp)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		e, _ := end.Lookup(topic, p)
		c, _ := committed.Lookup(topic, p)
		if c.At != e.Offset {
			t.Errorf("partition %d: committed %d, end %d", p, c.At, e.Offset)
		}
	}
	checkDescribeEmpty(t, adm, grp)

	// Restart the broker on the same directory: the group resumes from
	// its commits and sees only the new records.
	n.stop()
	n2 := startNode(t, n.dir)
	produceValues(t, n2.client(), topic, 1200, 1260)
	w2 := newGroupWatch()
	m := n2.startMember(t, w2, 0, grp, topic, opts...)
	defer m.stop()
	w2.waitFor(t, "60 new records", func() bool { return w2.total() >= 60 })
	w2.mu.Lock()
	defer w2.mu.Unlock()
	for p, offs := range w2.seen {
		e, _ := end.Lookup(topic, p)
		for off, v := range offs {
			if off < e.Offset {
				t.Errorf("partition %d: offset %d (%s) consumed again after restart", p, off, v)
			}
		}
	}
	if w2.total() != 60 {
		t.Errorf("got %d records after restart, want 60", w2.total())
	}
}

func checkDescribeEmpty(t *testing.T, adm *kadm.Client, grp string) {
	t.Helper()
	dg, err := adm.DescribeGroups(testCtx(t, 10*time.Second), grp)
	if err != nil {
		t.Fatal(err)
	}
	g := dg[grp]
	if g.Err != nil || g.State != "Empty" || len(g.Members) != 0 {
		t.Fatalf("group after every member left: %+v", g)
	}
	lg, err := adm.ListGroups(testCtx(t, 10*time.Second))
	if err != nil || len(lg.Groups()) != 1 {
		t.Fatalf("list groups: %v %v", lg, err)
	}
}
