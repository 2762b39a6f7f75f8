package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
)

// TestQueueLinearizableUnderPartition: three nodes behind fault proxies, one SQS queue on
// all of them, and three SQS clients, one straight to each node (requests for the queue
// are forwarded to its leader), each making one call at a time: SendMessage,
// ReceiveMessage of one message, DeleteMessage of a message it received; no SDK retries,
// so each call is one attempt whose invoke and return times are recorded. The queue's
// leader is cut off from both followers for SLUICE_CLUSTER_PARTITION_SECS (CI: 4) and
// healed. Then:
//
//   - the history is checked with porcupine against the sequential queue
//     (linearizable_model_test.go), an error or a timeout counting as an unknown outcome
//     that may take effect at any later time;
//   - every node's own report of the queue's leader and term, polled all along, never
//     names two leaders in one term;
//   - the two connected nodes' clients were answered during the partition.
func TestQueueLinearizableUnderPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	hold := time.Duration(envInt("SLUICE_CLUSTER_PARTITION_SECS", 4)) * time.Second
	users := filepath.Join(t.TempDir(), "users.yaml")
	file := strings.Replace(usersFile, "access_keys:", "tokens: ["+nativeToken+"]\n    access_keys:", 1)
	if err := os.WriteFile(users, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startClusterEach(t, 3, true, nil, "--auth-file", users)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+hold)
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	c.awaitRegistered(rctx, t, 3)
	qurl := createQueue(rctx, t, c.sqsClient(ctx, t, 1), "lin", 600)
	old := c.queueLeader(rctx, t, "lin")

	h := &qHistory{start: time.Now(), receipts: map[string]string{}}
	terms := watchTerms(ctx, c, "lin")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := 1; id <= 3; id++ {
		cl := c.sqsClient(ctx, t, id, func(o *awssqs.Options) { o.RetryMaxAttempts = 1 })
		url := strings.Replace(qurl, c.sqs[0], c.sqs[id-1], 1)
		wg.Add(1)
		go func() { defer wg.Done(); h.run(ctx, id, cl, url, stop) }()
	}
	time.Sleep(2 * time.Second)
	c.isolate(old, faultproxy.Cut)
	cutAt := h.now()
	t.Logf("node %d (the queue's leader) cut off from both followers", old)
	time.Sleep(hold)
	c.isolate(old, faultproxy.Pass)
	healAt := h.now()
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	claims := terms()

	ops := h.operations()
	unknown, during := 0, 0
	for _, op := range ops {
		switch {
		case op.Output.(qOutput).unknown:
			unknown++
		case op.Call > cutAt && op.Return < healAt && h.via(op) != old:
			during++
		}
	}
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(sqsQueueModel, ops, 20*time.Second)
	t.Logf("%d operations (%d unknown, %d answered by the majority's nodes during the partition): %v in %v; leaders by term %v",
		len(ops), unknown, during, res, time.Since(checkStart).Round(time.Millisecond), claims)
	switch res {
	case porcupine.Illegal:
		if path := os.Getenv("SLUICE_PORCUPINE_HTML"); path != "" {
			if err := porcupine.VisualizePath(sqsQueueModel, info, path); err != nil {
				t.Log(err)
			}
		}
		for _, op := range ops[:min(len(ops), 400)] {
			t.Logf("  [%d, %d] client %d: %s", op.Call, op.Return, op.ClientId, sqsQueueModel.DescribeOperation(op.Input, op.Output))
		}
		t.Errorf("the queue's history is not linearizable (SLUICE_PORCUPINE_HTML=file.html draws it)")
	case porcupine.Unknown:
		t.Logf("the check timed out: the history is neither proved nor refuted")
	}
	for term, nodes := range claims {
		if len(nodes) > 1 {
			t.Errorf("term %d: nodes %v each reported leading queue lin", term, nodes)
		}
	}
	if during == 0 {
		t.Errorf("no operation through nodes other than %d was answered during the partition", old)
	}
}

// qHistory is every client's operations. A client whose call had an unknown outcome
// goes on as a new porcupine client: its open call never returns.
type qHistory struct {
	start    time.Time
	mu       sync.Mutex
	ops      []porcupine.Operation
	node     map[int]int       // porcupine client -> node it spoke to
	receipts map[string]string // SQS receipt handle -> r<n>
	nextID   int
}

func (h *qHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *qHistory) add(client, node int, in qInput, out qOutput, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.node == nil {
		h.node = map[int]int{}
	}
	h.node[client] = node
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

func (h *qHistory) via(op porcupine.Operation) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.node[op.ClientId]
}

func (h *qHistory) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

func (h *qHistory) newClient() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	return h.nextID
}

func (h *qHistory) receiptName(handle string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := h.receipts[handle]; ok {
		return n
	}
	n := fmt.Sprintf("r%d", len(h.receipts))
	h.receipts[handle] = n
	return n
}

// run is one client of node id until stop: about 40 % sends, 40 % receives, 20 % deletes
// of what it received, one call at a time.
func (h *qHistory) run(ctx context.Context, id int, cl *awssqs.Client, url string, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 14))
	client := h.newClient()
	var held []string // receipt handles received, not yet deleted
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		call := h.now()
		var in qInput
		var out qOutput
		var err error
		switch r := rng.IntN(10); {
		case r < 2 && len(held) > 0:
			handle := held[0]
			held = held[1:]
			in = qInput{op: qDelete, receipt: h.receiptName(handle)}
			_, err = cl.DeleteMessage(octx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(handle)})
		case r < 6:
			in = qInput{op: qSend, body: fmt.Sprintf("c%d-%d", id, n)}
			_, err = cl.SendMessage(octx, &awssqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(in.body)})
		default:
			in = qInput{op: qReceive}
			var res *awssqs.ReceiveMessageOutput
			res, err = cl.ReceiveMessage(octx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1})
			switch {
			case err != nil:
			case len(res.Messages) == 0:
				out.empty = true
			default:
				m := res.Messages[0]
				out.body, out.receipt = aws.ToString(m.Body), h.receiptName(aws.ToString(m.ReceiptHandle))
				held = append(held, aws.ToString(m.ReceiptHandle))
			}
		}
		cancel()
		if err != nil {
			h.add(client, id, in, qOutput{unknown: true}, call, math.MaxInt64)
			client = h.newClient()
			// A refusing node answers at once; every unknown outcome multiplies the
			// checker's search, so they are kept few.
			time.Sleep(200 * time.Millisecond)
			continue
		}
		h.add(client, id, in, out, call, h.now())
		time.Sleep(30 * time.Millisecond) // a history porcupine checks in seconds
	}
}

// watchTerms polls every node's cluster status for queue's leader and term until ctx
// ends or the returned function is called, which gives, for each term, the nodes that
// reported themselves its leader.
func watchTerms(ctx context.Context, c *cluster, queue string) func() map[uint64][]int {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	claims := map[uint64][]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hc := &http.Client{Timeout: time.Second}
		for ctx.Err() == nil {
			for id := 1; id <= len(c.procs); id++ {
				if term, ok := leadsQueue(ctx, hc, c.procs[id-1].Addr("http"), id, queue); ok {
					mu.Lock()
					if !containsInt(claims[term], id) {
						claims[term] = append(claims[term], id)
					}
					mu.Unlock()
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() map[uint64][]int {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return claims
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// leadsQueue asks node id whether it leads queue, and in which term.
func leadsQueue(ctx context.Context, hc *http.Client, addr string, id int, queue string) (uint64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/admin/cluster", nil)
	if err != nil {
		return 0, false
	}
	req.Header.Set("Authorization", "Bearer "+nativeToken)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var st struct {
		Queues []struct {
			Queue  string `json:"queue"`
			Leader int    `json:"leader"`
			Term   uint64 `json:"term"`
		} `json:"queues"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return 0, false
	}
	for _, q := range st.Queues {
		if q.Queue == queue && q.Leader == id {
			return q.Term, true
		}
	}
	return 0, false
}
