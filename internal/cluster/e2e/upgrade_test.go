package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// beforeFeatureLevels is the last commit whose binary neither writes consumer-group
// membership records nor knows feature levels: its metadata group stops at the first
// record it cannot decode, which is what a rolling upgrade must never show it.
const beforeFeatureLevels = "43bc9d312c26503f819584fb3543f35d70e1f635"

// TestRollingUpgradeFromBeforeFeatureLevels: three nodes of an older sluice (built from
// beforeFeatureLevels) with a producer and a classic consumer-group member at work, upgraded
// one node at a time (SIGTERM, the new binary on the same data directory), the controller
// made a new node while old ones still run, and a second group formed on it: a coordinator
// that could write membership records. After every step every node, old ones included, still
// applies the metadata log (it learns a topic created then), and the feature level stays
// at the base until the last node runs the new binary; then it rises on every node, and a
// kill of the controller keeps the group's member (the records are on). Nothing
// acknowledged is lost, through all of it.
func TestRollingUpgradeFromBeforeFeatureLevels(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes of two builds")
	}
	dir := t.TempDir()
	old := testproc.BuildAt(t, dir, beforeFeatureLevels)
	c := startClusterOf(&cluster{t: t, bin: testproc.Build(t, dir), nodeBins: []string{old, old, old}}, 3, false)
	var gone []*testproc.Proc
	c.keepLogs(&gone)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	const topic, group, parts = "events", "workers", 3
	createTopic(ctx, t, adm, topic, parts, 3)
	commitStart(ctx, t, adm, group, topic, parts)
	pr := newProducer(c, topic, parts)
	pr.produce(ctx, t, 500)
	go pr.run(ctx)
	m := startMember(ctx, t, c, group, topic, false)
	m.waitProgress(ctx, t, 100)

	var lastReady time.Time
	for id := 1; id <= 3; id++ {
		gone = append(gone, c.procs[id-1])
		c.procs[id-1].Stop()
		c.nodeBins[id-1] = ""
		c.start(id)
		c.procs[id-1].Addr("kafka")
		lastReady = time.Now()
		m.waitProgress(ctx, t, 100) // the group rejoined and commits, on whichever coordinator
		// A membership change under a controller of the new build while old nodes run: a
		// second group forms and is left. A record of it would stop every old node's
		// metadata group, which the probe topic below shows. At the first step the
		// controller is made node 1 (restarting whichever old node leads), and the
		// probe group must have been coordinated by it.
		probeGroup := fmt.Sprintf("probe-%d", id)
		for try := 0; ; try++ {
			if try == 16 {
				t.Fatalf("step %d: node 1 never coordinated the probe group in %d tries", id, try)
			}
			ctl := agreedController(ctx, t, c, 0)
			if id == 1 && ctl != 1 {
				t.Logf("step %d, try %d: the controller is node %d (old): restarting it", id, try, ctl)
				gone = append(gone, c.procs[ctl-1])
				c.procs[ctl-1].Stop()
				agreedController(ctx, t, c, ctl) // the other two elected one of them
				c.start(ctl)
				c.procs[ctl-1].Addr("kafka")
				continue
			}
			pm := startMember(ctx, t, c, probeGroup, topic, false)
			describeMember(ctx, t, c, probeGroup)
			pm.close()
			coord, after := coordinatorOf(ctx, t, c, probeGroup), agreedController(ctx, t, c, 0)
			if id != 1 || coord == 1 && after == 1 {
				break
			}
			t.Logf("step %d, try %d: the probe group's coordinator was %d, the controller %d then %d", id, try, coord, ctl, after)
		}
		probe := fmt.Sprintf("after-%d", id)
		createTopic(ctx, t, adm, probe, 1, 3)
		everyNodeKnows(ctx, t, c, probe)
		if id < 3 {
			for n := 1; n <= id; n++ {
				st := c.awaitStatus(ctx, t, n, "a new node's status", func(broker.ClusterStatus) bool { return true })
				if st.FeatureLevel != meta.LevelBase {
					t.Fatalf("node %d upgraded of 3: node %d is at feature level %d, want %d while old nodes run", id, n, st.FeatureLevel, meta.LevelBase)
				}
			}
		}
		t.Logf("node %d runs the new binary; every node applies the metadata log", id)
	}
	for n := 1; n <= 3; n++ {
		c.awaitStatus(ctx, t, n, "the feature level risen", func(st broker.ClusterStatus) bool {
			return st.FeatureLevel == meta.MaxFeatureLevel
		})
	}
	t.Logf("feature level %d on every node %v after the last node's new binary was ready (its checks included)",
		meta.MaxFeatureLevel, time.Since(lastReady).Round(time.Millisecond))
	// The records are on: the group formed before the rise survives a controller kill.
	m.waitProgress(ctx, t, 100)
	memberID := describeMember(ctx, t, c, group)
	ctl := agreedController(ctx, t, c, 0)
	gone = append(gone, c.procs[ctl-1])
	c.kill(ctl)
	m.waitProgress(ctx, t, 100)
	if got := describeMember(ctx, t, c, group); got != memberID {
		t.Fatalf("after the controller's kill at feature level %d the member is %q, was %q: the group was not recorded", meta.MaxFeatureLevel, got, memberID)
	}
	c.start(ctl)

	acked := pr.stop()
	deadline := time.Now().Add(45 * time.Second)
	for m.missing(acked) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	m.close()
	t.Logf("acknowledged %d records; processed %d deliveries, %d redelivered", total(acked), m.processed.Load(), m.redeliveries())
	if missing := m.missing(acked); missing > 0 {
		t.Fatalf("%d acknowledged records were never processed", missing)
	}
}

// agreedController waits (30 s at most, or the test fails with every node's status) until
// every node but down (0: none) names one controller in its own status, other than down,
// and returns it. (Kafka Metadata through a client may be answered by any node, a dead one
// included.)
func agreedController(ctx context.Context, t *testing.T, c *cluster, down int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		named := map[int32]bool{}
		for n := 1; n <= len(c.procs); n++ {
			if n == down {
				continue
			}
			var st broker.ClusterStatus
			out, err := c.cliErr(n, "cluster", "status", "-o", "json")
			if err != nil || json.Unmarshal([]byte(out), &st) != nil {
				st.Controller = 0
			}
			named[st.Controller] = true
		}
		if len(named) == 1 && !named[0] && !named[int32(down)] {
			for ctl := range named {
				return int(ctl)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for n := 1; n <= len(c.procs); n++ {
		o, err := c.cliErr(n, "cluster", "status")
		t.Logf("node %d's status (%v):\n%s", n, err, o)
	}
	t.Fatalf("the nodes (but %d) named no one controller for 30 s", down)
	return 0
}

// coordinatorOf asks node 1 which node coordinates group (0: no answer).
func coordinatorOf(ctx context.Context, t *testing.T, c *cluster, group string) int {
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, ok := kadm.NewClient(c.nodeClient(t, 1)).FindGroupCoordinators(fctx, group)[group]
	if !ok || r.Err != nil {
		return 0
	}
	return int(r.NodeID)
}

// everyNodeKnows waits until every node, asked on its own, lists topic with a leader for
// each partition: each node answers Metadata from the catalog it applied, so a node whose
// metadata group stopped never does.
func everyNodeKnows(ctx context.Context, t *testing.T, c *cluster, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for id := 1; id <= len(c.procs); id++ {
		var last string
		for {
			mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			md, err := kadm.NewClient(c.nodeClient(t, id)).Metadata(mctx, topic)
			cancel()
			if err == nil {
				if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) > 0 {
					break
				}
				last = fmt.Sprintf("%+v", md.Topics[topic])
			} else {
				last = err.Error()
			}
			if ctx.Err() != nil {
				logs := strings.Split(c.procs[id-1].Logs(), "\n")
				t.Fatalf("node %d never learned topic %s: its metadata group stopped? last: %s\nits log's end:\n%s",
					id, topic, last, strings.Join(logs[max(0, len(logs)-30):], "\n"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestFeatureLevelHeldByOneNode: --cluster-max-feature-level on one node holds a cluster of
// new binaries at that level (the controller's status names the node), and restarting that
// node without it lets the level rise on every node.
func TestFeatureLevelHeldByOneNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	hold := true
	c := startClusterEach(t, 3, false, func(id int) []string {
		if id == 3 && hold {
			return []string{"--cluster-max-feature-level", "1"}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ctl := agreedController(ctx, t, c, 0)
	st := c.awaitStatus(ctx, t, ctl, "the controller naming node 3 as holding the level", func(st broker.ClusterStatus) bool {
		return len(st.FeatureLevelHeldBy) == 1 && strings.HasPrefix(st.FeatureLevelHeldBy[0], "node 3 (level 1)")
	})
	for n := 1; n <= 3; n++ {
		st = c.awaitStatus(ctx, t, n, "a status", func(broker.ClusterStatus) bool { return true })
		if st.FeatureLevel != meta.LevelBase {
			t.Fatalf("node %d at feature level %d while node 3 holds it at %d", n, st.FeatureLevel, meta.LevelBase)
		}
	}
	c.procs[2].Stop()
	hold = false
	c.start(3)
	for n := 1; n <= 3; n++ {
		c.awaitStatus(ctx, t, n, "the level risen once node 3 no longer holds it", func(st broker.ClusterStatus) bool {
			return st.FeatureLevel == meta.MaxFeatureLevel && st.ReadsFeatureLevel == meta.MaxFeatureLevel
		})
	}
}
