package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestConsumerGroupSurvivesControllerKills: three nodes, a topic of three partitions on
// all of them, a backlog and a producer that keeps adding to it, and a franz-go consumer
// group member (autocommit off, commit after processing, "latest" as its reset policy)
// draining it slowly while the controller — every group's coordinator — is SIGKILLed and
// restarted, SLUICE_CLUSTER_KILLS times (CI: 3). The checker: every acknowledged record
// was processed at least once (a coordinator that lost the committed offsets sends the
// member to "latest", past the records it had not processed yet), and redeliveries are
// counted (the records processed after the last commit a failover reached).
func TestConsumerGroupSurvivesControllerKills(t *testing.T) {
	groupKills(t, false)
}

// TestConsumerGroupKIP848SurvivesControllerKills is the same with a KIP-848 member
// (franz-go's server-side balancer, group.protocol=consumer): the controller records the
// consumer group's state, so after each kill the member heartbeats on at its epoch and never
// loses its partitions (before, the next controller answered UNKNOWN_MEMBER_ID and the
// member lost them and joined again at epoch 0).
func TestConsumerGroupKIP848SurvivesControllerKills(t *testing.T) {
	groupKills(t, true)
}

func groupKills(t *testing.T, kip848 bool) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	kills := envInt("SLUICE_CLUSTER_KILLS", 3)
	// KIP-848 members heartbeat every second here (Kafka's default is 5 s), so a kill is
	// noticed as soon as a classic member notices it.
	c := startCluster(t, 3, "--group-consumer-heartbeat-interval=1s")
	var gone []*testproc.Proc // the runs of killed nodes, for keepLogs
	c.keepLogs(&gone)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(90+kills*25)*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	const topic, group, parts = "events", "workers", 3
	createTopic(ctx, t, adm, topic, parts, 3)
	commitStart(ctx, t, adm, group, topic, parts)

	pr := newProducer(c, topic, parts)
	pr.produce(ctx, t, 2000) // per partition: a backlog the member cannot drain before the kills
	go pr.run(ctx)

	m := startMember(ctx, t, c, group, topic, kip848)
	m.waitProgress(ctx, t, 1)
	memberID := ""
	if !kip848 {
		memberID = describeMember(ctx, t, c, group)
	}
	for round := range kills {
		m.waitProgress(ctx, t, 300)
		ctl := c.controller(ctx)
		t.Logf("round %d: controller %d", round, ctl)
		commits := m.commits.Load()
		c.kill(ctl)
		killed := time.Now()
		for m.commits.Load() == commits && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		firstCommit := time.Since(killed)
		m.waitProgress(ctx, t, 300) // consumed and committed again, through the new coordinator
		t.Logf("round %d: killed node %d (the controller); the member's first commit accepted after %v, 300 more records processed and committed after %v",
			round, ctl, firstCommit, time.Since(killed))
		// The new controller kept the member: the same member id, never UNKNOWN_MEMBER_ID
		// (which makes franz-go drop its id and join as a new member). franz-go may still
		// rejoin under its id when a heartbeat cannot dial the dead node. (A KIP-848 member
		// keeps the id it made either way: the partitions it lost are checked below.)
		if !kip848 {
			if id := describeMember(ctx, t, c, group); id != memberID {
				t.Fatalf("round %d: the group's member is %q after the controller's kill, %q before: the new controller did not keep it", round, id, memberID)
			}
		}
		gone = append(gone, c.procs[ctl-1])
		c.start(ctl)
		c.procs[ctl-1].Addr("kafka")
	}
	acked := pr.stop()
	taken := m.taken.Load() // before close, whose leave revokes everything
	// Everything acknowledged must be processed now; the member drains the rest.
	deadline := time.Now().Add(45 * time.Second)
	for m.missing(acked) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	m.close()
	missing, redelivered, processed := m.missing(acked), m.redeliveries(), m.processed.Load()
	t.Logf("acknowledged %d records; processed %d deliveries, %d redelivered; %d commits failed and were retried",
		total(acked), processed, redelivered, m.commitErrs.Load())
	t.Logf("the member's partitions were taken from it (revoked or lost) %d times in %d controller kills", taken, kills)
	if missing > 0 {
		t.Fatalf("%d acknowledged records were never processed: skipped after a coordinator failover", missing)
	}
	if kip848 && taken > 0 {
		t.Fatalf("the KIP-848 member lost its partitions %d times in %d controller kills: the new controllers did not keep it", taken, kills)
	}
}

// describeMember returns the id of the group's one member, once it has one and is Stable.
// Each try is a new client: one that found a coordinator keeps asking it while it is dead.
func describeMember(ctx context.Context, t *testing.T, c *cluster, group string) string {
	t.Helper()
	last := ""
	for ctx.Err() == nil {
		cl := c.client()
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		gs, err := kadm.NewClient(cl).DescribeGroups(dctx, group)
		cancel()
		cl.Close()
		if err == nil {
			if g, ok := gs[group]; ok && g.Err == nil && g.State == "Stable" && len(g.Members) == 1 {
				return g.Members[0].MemberID
			}
		}
		last = fmt.Sprintf("%v %+v", err, gs)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("group %s never Stable with one member: %v; last: %s", group, ctx.Err(), last)
	return ""
}

// keepLogs writes every node's log to $SLUICE_E2E_LOGS/n<id>.log when the test fails
// (and the killed runs, killed<i>.log).
func (c *cluster) keepLogs(gone *[]*testproc.Proc) {
	dir := os.Getenv("SLUICE_E2E_LOGS")
	if dir == "" {
		return
	}
	c.t.Cleanup(func() {
		if !c.t.Failed() && os.Getenv("SLUICE_E2E_LOGS_ALWAYS") == "" {
			return
		}
		for i, p := range c.procs {
			if p != nil {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)), []byte(p.Logs()), 0o644)
			}
		}
		for i, p := range *gone {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("killed%d.log", i)), []byte(p.Logs()), 0o644)
		}
	})
}

// commitStart commits offset 0 of every partition for group before it has members, so
// even a partition nothing was processed from yet has a committed position: a record may
// then only be skipped by a coordinator losing committed offsets, never by "latest".
func commitStart(ctx context.Context, t *testing.T, adm *kadm.Client, group, topic string, parts int32) {
	t.Helper()
	var offs kadm.Offsets
	for p := range parts {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	for {
		resp, err := adm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("commit the start offsets: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// controller returns the controller once a majority of the nodes name it and none names
// another (a node just restarted may not know it yet), so the node killed is the
// coordinator.
func (c *cluster) controller(ctx context.Context) int {
	c.t.Helper()
	adms := make([]*kadm.Client, len(c.kafka))
	for i, addr := range c.kafka {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			c.t.Fatal(err)
		}
		defer cl.Close()
		adms[i] = kadm.NewClient(cl)
	}
	for ctx.Err() == nil {
		named := map[int]int{} // controller -> nodes naming it
		for _, adm := range adms {
			mctx, cancel := context.WithTimeout(ctx, time.Second)
			md, err := adm.BrokerMetadata(mctx)
			cancel()
			if err == nil && md.Controller > 0 {
				named[int(md.Controller)]++
			}
		}
		for id, n := range named {
			if len(named) == 1 && n >= 2 {
				return id
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0
}

// producer writes per-partition counters and remembers what was acknowledged.
type producer struct {
	cl      *kgo.Client
	topic   string
	mu      sync.Mutex
	next    []int
	acked   []map[int]bool
	done    chan struct{}
	stopped chan struct{}
}

func newProducer(c *cluster, topic string, parts int) *producer {
	p := &producer{cl: c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond)),
		topic: topic, next: make([]int, parts), acked: make([]map[int]bool, parts),
		done: make(chan struct{}), stopped: make(chan struct{})}
	for i := range p.acked {
		p.acked[i] = map[int]bool{}
	}
	return p
}

// produce sends n records to every partition and waits for their answers.
func (p *producer) produce(ctx context.Context, t *testing.T, n int) {
	var recs []*kgo.Record
	p.mu.Lock()
	for part := range p.next {
		for range n {
			recs = append(recs, &kgo.Record{Topic: p.topic, Partition: int32(part), Value: []byte(strconv.Itoa(p.next[part]))})
			p.next[part]++
		}
	}
	p.mu.Unlock()
	res := p.cl.ProduceSync(ctx, recs...)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range res {
		if r.Err == nil {
			v, _ := strconv.Atoi(string(r.Record.Value))
			p.acked[r.Record.Partition][v] = true
		}
	}
	if t != nil && res.FirstErr() != nil {
		t.Logf("produce: %v", res.FirstErr())
	}
}

// run adds 5 records per partition every 50 ms until stop.
func (p *producer) run(ctx context.Context) {
	defer close(p.stopped)
	for ctx.Err() == nil {
		select {
		case <-p.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		p.produce(ctx, nil, 5)
	}
}

func (p *producer) stop() []map[int]bool {
	close(p.done)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

func total(acked []map[int]bool) int {
	n := 0
	for _, a := range acked {
		n += len(a)
	}
	return n
}

// member is one consumer-group member processing slowly and committing what it processed.
type member struct {
	cl         *kgo.Client
	mu         sync.Mutex
	seen       []map[int]int // per partition: value -> times processed
	processed  atomic.Int64
	commits    atomic.Int64 // successful commits
	commitErrs atomic.Int64
	taken      atomic.Int64 // partitions revoked or lost: the member rebalanced
	cancel     context.CancelFunc
	done       chan struct{}
}

func startMember(ctx context.Context, t *testing.T, c *cluster, group, topic string, kip848 bool) *member {
	m := &member{seen: make([]map[int]int, 3), done: make(chan struct{})}
	for i := range m.seen {
		m.seen[i] = map[int]int{}
	}
	taken := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
		if len(lost) > 0 {
			m.taken.Add(1)
		}
	}
	opts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond), kgo.FetchMaxPartitionBytes(16 << 10),
		kgo.OnPartitionsRevoked(taken), kgo.OnPartitionsLost(taken)}
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	if dir := os.Getenv("SLUICE_E2E_LOGS"); dir != "" {
		if f, err := os.Create(filepath.Join(dir, "member.log")); err == nil {
			t.Cleanup(func() { f.Close() })
			opts = append(opts, kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelInfo, nil)))
		}
	}
	m.cl = c.client(opts...)
	ctx, m.cancel = context.WithCancel(ctx)
	go m.run(ctx, t)
	return m
}

func (m *member) run(ctx context.Context, t *testing.T) {
	defer close(m.done)
	for ctx.Err() == nil {
		fs := m.cl.PollRecords(ctx, 60)
		recs := fs.Records()
		m.mu.Lock()
		for _, r := range recs {
			v, _ := strconv.Atoi(string(r.Value))
			m.seen[r.Partition][v]++
		}
		m.mu.Unlock()
		m.processed.Add(int64(len(recs)))
		if len(recs) > 0 {
			if err := m.cl.CommitRecords(ctx, recs...); err != nil {
				m.commitErrs.Add(1)
				if ctx.Err() == nil {
					t.Logf("commit: %v", err)
				}
			} else {
				m.commits.Add(1)
			}
		}
		time.Sleep(30 * time.Millisecond) // slow processing: a backlog outlives the kills
	}
}

// waitProgress waits until the member processed and committed n more records.
func (m *member) waitProgress(ctx context.Context, t *testing.T, n int64) {
	t.Helper()
	from, commits := m.processed.Load(), m.commits.Load()
	for ctx.Err() == nil && (m.processed.Load() < from+n || m.commits.Load() <= commits) {
		time.Sleep(20 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("the member made no progress: %v", ctx.Err())
	}
}

func (m *member) missing(acked []map[int]bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for p, vs := range acked {
		for v := range vs {
			if m.seen[p][v] == 0 {
				n++
			}
		}
	}
	return n
}

func (m *member) redeliveries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, vs := range m.seen {
		for _, k := range vs {
			n += k - 1
		}
	}
	return n
}

func (m *member) close() {
	m.cancel()
	<-m.done
}
