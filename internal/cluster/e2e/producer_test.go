package e2e

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// loadedCluster is three nodes, a topic of three partitions on all of them, and an
// ordered producer on it: the leader kill and graceful stop tests' set-up.
type loadedCluster struct {
	*cluster
	ctx   context.Context
	adm   *kadm.Client
	topic string
	op    *orderedProducer
}

// startLoadedCluster starts it, with rounds × 20 s (and a minute) for the test.
func startLoadedCluster(t *testing.T, topic string, rounds int) (*loadedCluster, context.CancelFunc) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(60+rounds*20)*time.Second)
	adm := kadm.NewClient(c.client())
	const parts = 3
	createTopic(ctx, t, adm, topic, parts, 3)
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	return &loadedCluster{cluster: c, ctx: ctx, adm: adm, topic: topic, op: startOrderedProducer(ctx, prod, topic, parts)}, cancel
}

// leaderOfFirst waits for partition 0's leader and returns it.
func (lc *loadedCluster) leaderOfFirst(t *testing.T) int {
	t.Helper()
	for lc.ctx.Err() == nil {
		if leader := lc.leaderOf(lc.ctx, lc.adm, lc.topic, 0); leader != 0 {
			return leader
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no leader of %s/0: %v (acknowledged %d)", lc.topic, lc.ctx.Err(), lc.op.ackedN.Load())
	return 0
}

// orderedProducer produces without pause to every partition of a topic, ten records a
// partition per call, each record's value the next number of its partition, and keeps
// what was acknowledged in the order it was: the load of the leader kill and graceful
// stop tests, which then check every acknowledged record is in its partition in order.
type orderedProducer struct {
	mu     sync.Mutex
	acked  [][]int // per partition, acknowledged values in ack order
	ackedN atomic.Int64
	failed atomic.Int64
	// lastStart is when the most recently answered produce call started: a failover is
	// over when a call made after the kill (or stop) is answered.
	lastStart atomic.Int64
	stop      chan struct{}
	stopped   chan struct{}
}

// startOrderedProducer starts producing to topic's parts partitions through prod.
func startOrderedProducer(ctx context.Context, prod *kgo.Client, topic string, parts int) *orderedProducer {
	op := &orderedProducer{acked: make([][]int, parts), stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(op.stopped)
		next := make([]int, parts)
		for {
			select {
			case <-op.stop:
				return
			default:
			}
			var recs []*kgo.Record
			for p := range parts {
				for range 10 {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(strconv.Itoa(next[p]))})
					next[p]++
				}
			}
			started := time.Now().UnixNano()
			res := prod.ProduceSync(ctx, recs...)
			if res.FirstErr() == nil {
				op.lastStart.Store(started)
			}
			op.mu.Lock()
			for _, r := range res {
				if r.Err != nil {
					op.failed.Add(1)
					continue
				}
				v, _ := strconv.Atoi(string(r.Record.Value))
				op.acked[r.Record.Partition] = append(op.acked[r.Record.Partition], v)
				op.ackedN.Add(1)
			}
			op.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return op
}

// answeredSince waits until a produce call started after t was answered, and returns how
// long after t that was.
func (op *orderedProducer) answeredSince(ctx context.Context, t time.Time) time.Duration {
	for op.lastStart.Load() < t.UnixNano() && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t)
}

// finish stops producing and returns what was acknowledged (held: the caller checks it).
func (op *orderedProducer) finish() [][]int {
	close(op.stop)
	<-op.stopped
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.acked
}
