package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestFIFOWithDeadLetterQueueLeaderKilled: a FIFO queue with a FIFO dead-letter queue
// (maxReceiveCount 2) on three nodes, an aws-sdk-go-v2 producer (groups sent in order,
// each send retried with its deduplication id until answered) and a consumer that never
// deletes the "poison" messages, both through one node, and the FIFO queue's leader
// killed with SIGKILL and restarted. Afterwards: within a group nothing was delivered
// before every earlier message of the group was deleted or dead-lettered; every
// acknowledged send was deleted or is in the dead-letter queue, every poison message is
// there; no message was stored twice (a retry across a failover was deduplicated: one
// message id per body), and a re-send of an acknowledged deduplication id after the
// kills answers the original message id. SLUICE_CLUSTER_KILLS sets the rounds (CI: 2).
func TestFIFOWithDeadLetterQueueLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	kills := envInt("SLUICE_CLUSTER_KILLS", 2)
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(usersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, "--auth-file", users)
	for i := range c.procs {
		c.procs[i].Addr("sqs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(120+kills*25)*time.Second)
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	c.awaitRegistered(rctx, t, 3)
	const visibility = 3 // seconds: a poison message is dead-lettered after two
	probe := c.sqsClient(ctx, t, 1)
	dlqURL := createFIFO(ctx, t, probe, "dead.fifo", nil)
	attrs, err := probe.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"2"}`, attrs.Attributes["QueueArn"])
	createFIFO(ctx, t, probe, "jobs.fifo", map[string]string{"RedrivePolicy": policy, "VisibilityTimeout": strconv.Itoa(visibility)})
	first := c.queueLeader(ctx, t, "jobs.fifo")
	via := first%3 + 1
	cl := c.sqsClient(ctx, t, via)
	qurl := "http://" + c.sqs[via-1] + "/000000000000/jobs.fifo"
	dlqURL = "http://" + c.sqs[via-1] + "/000000000000/dead.fifo"
	t.Logf("jobs.fifo first led by node %d; clients through node %d", first, via)

	// Enough messages that every round's kill falls while they are sent (a round is about
	// 5 s, 125 sends): with more kills than that, later rounds waited 30 s for sends that
	// never came.
	ck := newFIFOChecker(max(fifoTotal, kills*130))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ck.produce(ctx, cl, qurl, stop) }()
	go func() { defer wg.Done(); ck.consume(ctx, cl, qurl, visibility) }()
	for round := range kills {
		time.Sleep(4 * time.Second)
		leader := c.queueLeader(ctx, t, "jobs.fifo")
		c.kill(leader)
		killed := time.Now()
		time.Sleep(500 * time.Millisecond)
		c.start(leader)
		c.procs[leader-1].Addr("sqs")
		sent := ck.sentCount()
		for ck.sentCount() == sent && ctx.Err() == nil && time.Since(killed) < 30*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("round %d: killed node %d (jobs.fifo's leader); sends answered again after %v", round, leader, time.Since(killed))
	}
	wg.Wait() // the producer sent everything; the consumer drained the queue
	close(stop)
	ck.checkResend(ctx, t, cl, qurl)
	ck.checkDeadLetters(ctx, t, cl, dlqURL)
	ck.report(t)
}

func createFIFO(ctx context.Context, t *testing.T, cl *awssqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	a := map[string]string{"FifoQueue": "true"}
	for k, v := range attrs {
		a[k] = v
	}
	for {
		out, err := cl.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a})
		if err == nil {
			return aws.ToString(out.QueueUrl)
		}
		if ctx.Err() != nil {
			t.Fatalf("create queue %s: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// 360 messages (at least) in 12 groups at about 25 a second (the kills fall while they are
// sent); each group of 30 holds two poison messages, which block it for two visibility
// timeouts each.
const (
	fifoGroups = 12
	fifoTotal  = 360
)

// fifoChecker keeps what the clients were told. Message "g-s" is the s-th of group g;
// every 15th is poison (never deleted).
type fifoChecker struct {
	mu         sync.Mutex
	ids        map[string]string    // body -> message id of the answered send
	sentAt     map[string]time.Time // body -> when its send was answered
	next       [fifoGroups]int      // per group: the next seq to send
	done       map[string]string    // body -> how it left: deleted, maybe (a delete of unknown outcome)
	received   map[string]int       // deliveries per body
	idsSeen    map[string]string    // body -> message id delivered
	violations []string
	total      int // messages to send
	errs       int
	// lostReceives counts ReceiveMessage calls that failed: one the leader carried out
	// before it was killed counted a receive of each message it took (SQS counts a receive
	// whose answer is lost too), and those the checker never saw.
	lostReceives int
}

func newFIFOChecker(total int) *fifoChecker {
	return &fifoChecker{total: total, ids: map[string]string{}, sentAt: map[string]time.Time{}, done: map[string]string{}, received: map[string]int{}, idsSeen: map[string]string{}}
}

func poison(seq int) bool { return seq%15 == 7 }

func (ck *fifoChecker) sentCount() int {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	return len(ck.ids)
}

func (ck *fifoChecker) produce(ctx context.Context, cl *awssqs.Client, qurl string, stop <-chan struct{}) {
	for n := 0; n < ck.total; n++ {
		time.Sleep(40 * time.Millisecond)
		select {
		case <-stop:
			return
		default:
		}
		g := n % fifoGroups
		ck.mu.Lock()
		body := fmt.Sprintf("%d-%d", g, ck.next[g])
		ck.mu.Unlock()
		// Retried with the same deduplication id until answered: a send whose answer a
		// failover lost must not be stored twice.
		for ctx.Err() == nil {
			out, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(qurl), MessageBody: aws.String(body),
				MessageGroupId: aws.String(strconv.Itoa(g)), MessageDeduplicationId: aws.String("d" + body)})
			if err == nil {
				ck.mu.Lock()
				ck.ids[body] = aws.ToString(out.MessageId)
				ck.sentAt[body] = time.Now()
				ck.next[g]++
				ck.mu.Unlock()
				break
			}
			ck.mu.Lock()
			ck.errs++
			ck.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func parseBody(b string) (g, s int) {
	x, y, _ := strings.Cut(b, "-")
	g, _ = strconv.Atoi(x)
	s, _ = strconv.Atoi(y)
	return g, s
}

// consume receives, checking each group's order, until every answered send was delivered
// and the queue stayed empty long enough for the poison messages to be dead-lettered.
func (ck *fifoChecker) consume(ctx context.Context, cl *awssqs.Client, qurl string, visibility int32) {
	idle := 0
	for ctx.Err() == nil {
		out, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(qurl),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: visibility})
		if err != nil {
			ck.mu.Lock()
			ck.lostReceives++
			ck.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if len(out.Messages) == 0 {
			idle++
			if idle > 2*int(visibility)+3 && ck.quiet() {
				return // nothing left but dead letters, and their moves had time
			}
			continue
		}
		idle = 0
		// The whole batch is checked before any of it is deleted: two messages of a group
		// in one batch are a violation.
		for _, m := range out.Messages {
			ck.delivered(aws.ToString(m.Body), aws.ToString(m.MessageId))
		}
		for _, m := range out.Messages {
			if _, s := parseBody(aws.ToString(m.Body)); poison(s) {
				continue
			}
			_, err := cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(qurl), ReceiptHandle: m.ReceiptHandle})
			ck.mu.Lock()
			if err == nil {
				ck.done[aws.ToString(m.Body)] = "deleted"
			} else if ck.done[aws.ToString(m.Body)] == "" {
				ck.done[aws.ToString(m.Body)] = "maybe"
			}
			ck.mu.Unlock()
		}
	}
}

// quiet: the producer's sends are all delivered at least once.
func (ck *fifoChecker) quiet() bool {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for body := range ck.ids {
		if ck.received[body] == 0 {
			return false
		}
	}
	return true
}

// delivered checks a delivery against its group: every earlier message of the group
// must be deleted (or maybe deleted), or poison and received maxReceiveCount (2) times
// already (it is dead-lettered by the receive after that, before this one may go). One
// of the two may be unseen if a receive's answer was lost (lostReceives: the killed
// leader may have received it); checkDeadLetters still demands it in the dead-letter
// queue.
func (ck *fifoChecker) delivered(body, id string) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.received[body]++
	if prev, ok := ck.idsSeen[body]; ok && prev != id {
		ck.violations = append(ck.violations, fmt.Sprintf("%s stored twice: ids %s and %s", body, prev, id))
	}
	ck.idsSeen[body] = id
	g, s := parseBody(body)
	for e := 0; e < s; e++ {
		earlier := fmt.Sprintf("%d-%d", g, e)
		unseen := 2 - ck.received[earlier] // receives of a poison message not seen here
		if (poison(e) && (unseen > 1 || unseen == 1 && ck.lostReceives == 0)) || (!poison(e) && ck.done[earlier] == "") {
			ck.violations = append(ck.violations, fmt.Sprintf("%s delivered before %s of its group was deleted", body, earlier))
			return
		}
	}
}

// checkResend sends acknowledged deduplication ids again: within the window each is
// answered with the original message id (the dedup state survived the kills). Only ids
// answered less than 4 minutes ago are sent: SQS's window is 5 (a long run's first sends
// are past it, and a re-send of those is rightly a new message).
func (ck *fifoChecker) checkResend(ctx context.Context, t *testing.T, cl *awssqs.Client, qurl string) {
	ck.mu.Lock()
	bodies := make([]string, 0, len(ck.ids))
	for b := range ck.ids {
		if time.Since(ck.sentAt[b]) < 4*time.Minute {
			bodies = append(bodies, b)
		}
	}
	ck.mu.Unlock()
	if len(bodies) == 0 {
		t.Fatal("no acknowledged send within the last 4 minutes to re-send")
	}
	for _, body := range bodies[:min(30, len(bodies))] {
		g, _ := parseBody(body)
		out, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(qurl), MessageBody: aws.String(body),
			MessageGroupId: aws.String(strconv.Itoa(g)), MessageDeduplicationId: aws.String("d" + body)})
		if err != nil {
			t.Errorf("re-send %s: %v", body, err)
			continue
		}
		if id := aws.ToString(out.MessageId); id != ck.ids[body] {
			t.Errorf("re-send of %s answered id %s, the original was %s: not deduplicated", body, id, ck.ids[body])
		}
	}
}

// checkDeadLetters reads the dead-letter queue: every poison message is there (once or,
// at worst, more), and every acknowledged send is deleted or there.
func (ck *fifoChecker) checkDeadLetters(ctx context.Context, t *testing.T, cl *awssqs.Client, dlqURL string) {
	dead := map[string]int{}
	for empty := 0; empty < 3 && ctx.Err() == nil; {
		out, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			dead[aws.ToString(m.Body)]++
			if id := aws.ToString(m.MessageId); id != ck.ids[aws.ToString(m.Body)] {
				t.Errorf("dead letter %s has id %s, sent as %s", aws.ToString(m.Body), id, ck.ids[aws.ToString(m.Body)])
			}
			// Deleted, or its group's next dead letter stays behind it (a FIFO queue).
			if _, err := cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Errorf("delete dead letter %s: %v", aws.ToString(m.Body), err)
			}
		}
	}
	ck.mu.Lock()
	defer ck.mu.Unlock()
	var lost []string
	dups, poisoned := 0, 0
	for body := range ck.ids {
		_, s := parseBody(body)
		if poison(s) {
			poisoned++
		}
		if dead[body] == 0 && (poison(s) || ck.done[body] == "") {
			lost = append(lost, body)
		}
		if dead[body] > 1 {
			dups += dead[body] - 1
		}
	}
	t.Logf("%d sends answered (%d poison), %d send errors, %d dead letters (%d duplicated)", len(ck.ids), poisoned, ck.errs, len(dead), dups)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged sends neither deleted nor in the dead-letter queue, e.g. %v", len(lost), lost[:min(10, len(lost))])
	}
	if poisoned == 0 {
		t.Error("no poison message was sent")
	}
}

func (ck *fifoChecker) report(t *testing.T) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for _, v := range ck.violations[:min(10, len(ck.violations))] {
		t.Error(v)
	}
	if len(ck.ids) == 0 {
		t.Error("nothing was sent")
	}
}
