package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestQueueLeaderKilledUnderLoad: three nodes, one SQS queue replicated on all of them,
// an aws-sdk-go-v2 producer and consumer both speaking to one node only (requests for a
// queue led elsewhere are forwarded inside the cluster), and the queue's leader killed
// with SIGKILL and restarted, again and again. The checker asserts that every
// acknowledged SendMessage is received, and that no message is delivered by a receive
// that started after its DeleteMessage was answered. Redeliveries (a receive whose answer
// was lost in a failover comes back after the visibility timeout) are counted.
// SLUICE_CLUSTER_KILLS sets the rounds (CI: 3).
func TestQueueLeaderKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	kills := envInt("SLUICE_CLUSTER_KILLS", 3)
	// With authentication on, so every forwarded request's SigV4 signature is checked
	// again by the node it is forwarded to.
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(usersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, "--auth-file", users)
	for i := range c.procs {
		c.procs[i].Addr("sqs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(90+kills*25)*time.Second)
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()

	// The queue's replication factor is min(3, nodes registered) when it is created.
	c.awaitRegistered(rctx, t, 3)
	const visibility = 10 // seconds: longer than a failover, so a delete is never late
	// The client's node: chosen to be another than the queue's first leader, so forwarding
	// is at work from the first request.
	probe := c.sqsClient(ctx, t, 1)
	qurl := createQueue(ctx, t, probe, "jobs", visibility)
	if !strings.Contains(qurl, c.sqs[0]) {
		t.Fatalf("queue URL %s does not name node 1 (%s), which the client asked", qurl, c.sqs[0])
	}
	first := c.queueLeader(ctx, t, "jobs")
	via := first%3 + 1
	cl := c.sqsClient(ctx, t, via)
	qurl = strings.Replace(qurl, c.sqs[0], c.sqs[via-1], 1)
	t.Logf("queue's first leader: node %d; clients through node %d (%s)", first, via, qurl)

	ck := newQueueChecker()
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ck.produce(ctx, cl, qurl, stop) }()
	consumeDone := make(chan struct{})
	go func() { defer wg.Done(); ck.consume(ctx, cl, qurl, visibility, consumeDone) }()

	// Until the first kill the queue is led by another node than the clients': every
	// answered request was forwarded (and its signature checked again there).
	for ck.sent.Load() == 0 {
		if ctx.Err() != nil || time.Since(start) > 20*time.Second {
			t.Fatalf("no send answered through node %d while node %d leads: %v", via, first, ck.lastErr.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}

	var failovers []time.Duration
	for round := range kills {
		time.Sleep(2 * time.Second)
		leader := c.queueLeader(ctx, t, "jobs")
		c.kill(leader)
		killed := time.Now()
		restart := func() {
			time.Sleep(500 * time.Millisecond)
			c.start(leader)
			c.procs[leader-1].Addr("sqs")
		}
		if leader == via {
			// The clients' own node led: they get nowhere until it is back.
			restart()
		}
		for ck.lastSendStart.Load() < killed.UnixNano() && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
			if time.Since(killed) > 30*time.Second {
				for i, p := range c.procs {
					var keep []string
					for _, l := range strings.Split(p.Logs(), "\n") {
						if !strings.Contains(l, "request failed") {
							keep = append(keep, l)
						}
					}
					logs := strings.Join(keep, "\n")
					t.Logf("node %d logs (tail):\n%s", i+1, logs[max(0, len(logs)-6000):])
				}
				t.Fatalf("no send answered 30 s after the kill; last error: %v", ck.lastErr.Load())
			}
		}
		failovers = append(failovers, time.Since(killed))
		t.Logf("round %d: killed node %d (the queue's leader; clients' node: %v); a send made after the kill answered after %v",
			round, leader, leader == via, failovers[round])
		if leader != via {
			restart()
		}
	}
	time.Sleep(time.Second)
	close(stop)
	// Drain: every acknowledged send received and deleted, or the visibility timeout of a
	// lost delivery and then some have passed.
	drain := time.Now().Add(time.Duration(visibility)*time.Second + 30*time.Second)
	for !ck.drained() && time.Now().Before(drain) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	close(consumeDone)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("ran out of time: %v", ctx.Err())
	}
	ck.report(t, failovers)
}

const usersFile = `
users:
  - name: app
    password: app-pw
    access_keys: [{id: AKIDAPP, secret: app-secret}]
acls:
  - {user: app, allow: [all], resources: ["*"]}
`

// queueChecker keeps what the clients were told.
type queueChecker struct {
	mu        sync.Mutex
	acked     map[int]bool      // SendMessage answered
	received  map[int]int       // deliveries per message
	deletedAt map[int]time.Time // DeleteMessage answered
	// unsettled is when a delete of the message failed (its answer lost in a failover, or
	// refused): it comes back after the visibility timeout unless it was in fact deleted.
	unsettled     map[int]time.Time
	visibility    time.Duration // the consumer's
	violations    []string
	sent, sendErr atomic.Int64
	recvErr       atomic.Int64
	delErr        atomic.Int64
	lastErr       atomic.Value
	lastSendStart atomic.Int64 // start of the latest answered send (a failover ends when a send made after the kill answers)
}

func newQueueChecker() *queueChecker {
	return &queueChecker{acked: map[int]bool{}, received: map[int]int{}, deletedAt: map[int]time.Time{}, unsettled: map[int]time.Time{}}
}

func (ck *queueChecker) produce(ctx context.Context, cl *awssqs.Client, qurl string, stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		_, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(qurl), MessageBody: aws.String(strconv.Itoa(n))})
		if err != nil {
			if ck.sendErr.Add(1)%50 == 1 {
				ck.lastErr.Store(err.Error())
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		ck.lastSendStart.Store(start.UnixNano())
		ck.sent.Add(1)
		ck.mu.Lock()
		ck.acked[n] = true
		ck.mu.Unlock()
	}
}

func (ck *queueChecker) consume(ctx context.Context, cl *awssqs.Client, qurl string, visibility int32, done <-chan struct{}) {
	ck.mu.Lock()
	ck.visibility = time.Duration(visibility) * time.Second
	ck.mu.Unlock()
	for {
		select {
		case <-done:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		out, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(qurl),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: visibility})
		if err != nil {
			ck.recvErr.Add(1)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for _, m := range out.Messages {
			n, _ := strconv.Atoi(aws.ToString(m.Body))
			ck.mu.Lock()
			ck.received[n]++
			if at, ok := ck.deletedAt[n]; ok && at.Before(start) {
				ck.violations = append(ck.violations, fmt.Sprintf("message %d delivered by a receive started %v after its delete was answered", n, start.Sub(at)))
			}
			ck.mu.Unlock()
		}
		if len(out.Messages) == 0 {
			continue
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		res, err := cl.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: aws.String(qurl), Entries: entries})
		if err != nil {
			ck.delErr.Add(1)
			ck.mu.Lock()
			for _, m := range out.Messages {
				n, _ := strconv.Atoi(aws.ToString(m.Body))
				ck.unsettled[n] = time.Now()
			}
			ck.mu.Unlock()
			continue // left to come back after the visibility timeout, unless it was deleted
		}
		answered := time.Now()
		ck.mu.Lock()
		for _, f := range res.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			n, _ := strconv.Atoi(aws.ToString(out.Messages[i].Body))
			ck.unsettled[n] = answered
		}
		for _, ok := range res.Successful {
			i, _ := strconv.Atoi(aws.ToString(ok.Id))
			n, _ := strconv.Atoi(aws.ToString(out.Messages[i].Body))
			if _, seen := ck.deletedAt[n]; !seen {
				ck.deletedAt[n] = answered
			}
		}
		ck.delErr.Add(int64(len(res.Failed)))
		ck.mu.Unlock()
	}
}

// drained: every acknowledged send has been deleted, or received and its delete failed
// more than a visibility timeout ago without the message coming back (the delete's answer
// was lost, the message is gone: waiting for it would only run the drain to its deadline).
func (ck *queueChecker) drained() bool {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for n := range ck.acked {
		if _, ok := ck.deletedAt[n]; ok {
			continue
		}
		if at, ok := ck.unsettled[n]; ok && ck.received[n] > 0 && time.Since(at) > ck.visibility+2*time.Second {
			continue
		}
		return false
	}
	return true
}

func (ck *queueChecker) report(t *testing.T, failovers []time.Duration) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	var missing []int
	dups := 0
	for n := range ck.acked {
		if ck.received[n] == 0 {
			missing = append(missing, n)
		}
	}
	for _, k := range ck.received {
		dups += k - 1
	}
	t.Logf("sent %d (acknowledged), %d send errors, %d receive errors, %d delete errors; %d messages received, %d redeliveries; failovers %v",
		ck.sent.Load(), ck.sendErr.Load(), ck.recvErr.Load(), ck.delErr.Load(), len(ck.received), dups, summarize(failovers))
	if len(missing) > 0 {
		t.Errorf("%d acknowledged sends never received, e.g. %v", len(missing), missing[:min(len(missing), 10)])
	}
	for _, v := range ck.violations[:min(len(ck.violations), 10)] {
		t.Error(v)
	}
	if ck.sent.Load() == 0 {
		t.Error("nothing was sent")
	}
}

// sqsClient is an aws-sdk-go-v2 client of node id's SQS listener, with the SDK's own
// retries (as an application would run it).
func (c *cluster) sqsClient(ctx context.Context, t *testing.T, id int, opts ...func(*awssqs.Options)) *awssqs.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDAPP", "app-secret", "")))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]func(*awssqs.Options){func(o *awssqs.Options) { o.BaseEndpoint = aws.String("http://" + c.sqs[id-1]) }}, opts...)
	return awssqs.NewFromConfig(cfg, opts...)
}

func createQueue(ctx context.Context, t *testing.T, cl *awssqs.Client, name string, visibility int) string {
	t.Helper()
	for {
		out, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name),
			Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(visibility)}})
		if err == nil {
			return aws.ToString(out.QueueUrl)
		}
		if ctx.Err() != nil {
			t.Fatalf("create queue: %v", err)
		}
		t.Logf("create queue: %v; retrying", err)
		time.Sleep(200 * time.Millisecond)
	}
}

// queueLeader finds the node leading queue name: asked with the forwarded mark, a node
// that does not lead answers ServiceUnavailable instead of forwarding, and the leader
// answers.
func (c *cluster) queueLeader(ctx context.Context, t *testing.T, name string) int {
	t.Helper()
	for ctx.Err() == nil {
		for i := range c.sqs {
			cl := c.sqsClient(ctx, t, i+1, func(o *awssqs.Options) {
				o.RetryMaxAttempts = 1
				o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Sluice-Forwarded-Base", "http://"+c.sqs[i]))
			})
			_, err := cl.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
				QueueUrl:       aws.String("http://" + c.sqs[i] + "/000000000000/" + name),
				AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
			if err == nil {
				return i + 1
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no leader of queue %s: %v", name, ctx.Err())
	return 0
}

// awaitRegistered waits until every node's catalog lists all n nodes. Kafka Metadata
// lists the node asked and the other registered ones, so each node is asked on its own
// (a new client each time: a client caches what it was told).
func (c *cluster) awaitRegistered(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for i := 0; i < len(c.kafka); {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[i]),
			kgo.SASL(plain.Auth{User: "app", Pass: "app-pw"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		cl.Close()
		if err == nil && len(md.Brokers) == n {
			i++
			continue
		}
		if ctx.Err() != nil {
			t.Fatalf("node %d never listed %d nodes: %v (it lists %v)", i+1, n, err, md.Brokers)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
