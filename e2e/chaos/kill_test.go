package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// ledger is one protocol's history across the kills: what the producer had
// acknowledged, what the consumer was handed, and when its deletes were
// confirmed.
type ledger struct {
	mu          sync.Mutex
	acked       map[string]bool
	received    map[string]int
	deletedAt   map[string]time.Time
	resurrected []string // handed out by a receive that began after its delete was confirmed
}

func newLedger() *ledger {
	return &ledger{acked: map[string]bool{}, received: map[string]int{}, deletedAt: map[string]time.Time{}}
}

func (l *ledger) sent(body string) { l.mu.Lock(); l.acked[body] = true; l.mu.Unlock() }

func (l *ledger) got(body string, began time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.received[body]++
	if at, ok := l.deletedAt[body]; ok && at.Before(began) {
		l.resurrected = append(l.resurrected, body)
	}
}

func (l *ledger) deleted(body string) { l.mu.Lock(); l.deletedAt[body] = time.Now(); l.mu.Unlock() }

// figures are the checker's counts: acknowledged, lost (acknowledged and
// never received), duplicates (deliveries beyond the first).
func (l *ledger) figures() (acked, lost, dups int, lostSample []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for b := range l.acked {
		if l.received[b] == 0 {
			lost++
			if len(lostSample) < 5 {
				lostSample = append(lostSample, b)
			}
		}
	}
	for _, n := range l.received {
		dups += max(0, n-1)
	}
	return len(l.acked), lost, dups, lostSample
}

// queueProto drives one queue protocol: send a body, receive up to ten
// (body, receipt) pairs, delete one by receipt.
type queueProto struct {
	name    string
	send    func(ctx context.Context, body string) error
	receive func(ctx context.Context) ([][2]string, error)
	ack     func(ctx context.Context, receipt string) error
}

func nativeProto(addr, queue string) queueProto {
	c := client.New("http://" + addr)
	return queueProto{
		name: "native",
		send: func(ctx context.Context, body string) error { _, err := c.Send(ctx, queue, []byte(body)); return err },
		receive: func(ctx context.Context) ([][2]string, error) {
			ms, err := c.Receive(ctx, queue, client.MaxMessages(10), client.Wait(500*time.Millisecond))
			out := make([][2]string, len(ms))
			for i, m := range ms {
				out[i] = [2]string{string(m.GetBody()), m.GetReceipt()}
			}
			return out, err
		},
		ack: func(ctx context.Context, r string) error { return c.Ack(ctx, queue, r) },
	}
}

func sqsProto(addr, queue string) queueProto {
	url := "http://" + addr
	qurl := url + "/000000000000/" + queue
	call := func(ctx context.Context, action string, in, out any) error {
		b, _ := json.Marshal(in)
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(string(b)))
		req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %d", action, resp.StatusCode)
		}
		if out != nil {
			return json.NewDecoder(resp.Body).Decode(out)
		}
		return nil
	}
	return queueProto{
		name: "sqs",
		send: func(ctx context.Context, body string) error {
			return call(ctx, "SendMessage", map[string]any{"QueueUrl": qurl, "MessageBody": body}, nil)
		},
		receive: func(ctx context.Context) ([][2]string, error) {
			var out struct {
				Messages []struct{ Body, ReceiptHandle string }
			}
			err := call(ctx, "ReceiveMessage", map[string]any{"QueueUrl": qurl, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}, &out)
			got := make([][2]string, len(out.Messages))
			for i, m := range out.Messages {
				got[i] = [2]string{m.Body, m.ReceiptHandle}
			}
			return got, err
		},
		ack: func(ctx context.Context, r string) error {
			return call(ctx, "DeleteMessage", map[string]any{"QueueUrl": qurl, "ReceiptHandle": r}, nil)
		},
	}
}

// produceLoop sends numbered bodies until ctx ends, recording each one
// acknowledged.
func produceLoop(ctx context.Context, q queueProto, l *ledger, next func() int) {
	for ctx.Err() == nil {
		body := fmt.Sprintf("%s-%d", q.name, next())
		if q.send(ctx, body) == nil {
			l.sent(body)
		}
	}
}

// consumeLoop receives and deletes until ctx ends; with idle set, it also
// ends after that long with nothing received (the final drain).
func consumeLoop(ctx context.Context, q queueProto, l *ledger, idle time.Duration) {
	quietSince := time.Now()
	for ctx.Err() == nil {
		began := time.Now()
		ms, err := q.receive(ctx)
		if err != nil {
			time.Sleep(20 * time.Millisecond) // the server is gone or going; ctx ends the loop
			continue
		}
		if len(ms) > 0 {
			quietSince = time.Now()
		} else if idle > 0 && time.Since(quietSince) > idle {
			return
		}
		for _, m := range ms {
			l.got(m[0], began)
			if q.ack(ctx, m[1]) == nil {
				l.deleted(m[0])
			}
		}
	}
}

// kafkaLoop produces numbered values to topic until ctx ends, recording
// each one the broker acknowledged (acks=all).
func kafkaLoop(ctx context.Context, addr, topic string, l *ledger, next func() int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordRetries(0), kgo.DisableIdempotentWrite(),
		kgo.RecordDeliveryTimeout(3*time.Second), kgo.ProducerLinger(0))
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		v := fmt.Sprintf("kafka-%d", next())
		if cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr() == nil {
			l.sent(v)
		}
	}
}

// kafkaIdemLoop is kafkaLoop as an idempotent producer (franz-go's default): several
// of them on one partition share the partition's syncs, each batch recorded in the
// producer state before it is durable (broker/produce.go), which a kill must not turn
// into a lost acknowledgement.
func kafkaIdemLoop(ctx context.Context, addr, topic string, l *ledger, next func() int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordDeliveryTimeout(3*time.Second),
		kgo.AllowIdempotentProduceCancellation(), kgo.ProducerLinger(0))
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		v := fmt.Sprintf("kafka-idem-%d", next())
		if cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr() == nil {
			l.sent(v)
		}
	}
}

// readTopic reads every record of topic from the start.
func readTopic(t *testing.T, addr, topic string, l *ledger) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	quiet := 0
	for quiet < 3 && ctx.Err() == nil {
		fctx, fcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(fctx)
		fcancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { l.got(string(r.Value), time.Time{}); n++ })
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
}

// kill -9 under load, over the native API, SQS and Kafka at once, at a
// random moment of each round, on the same data directory: nothing
// acknowledged is lost, nothing whose delete was confirmed is delivered
// again, and duplicates (redeliveries) are counted. Short form: 3 kills of
// about a second of load; SLUICE_CHAOS_LONG=1: 20 kills of up to 3 s.
func TestKillUnderLoad(t *testing.T) {
	kills, load := 3, time.Second
	if long() {
		kills, load = 20, 3*time.Second
	}
	dir := t.TempDir()
	led := map[string]*ledger{"native": newLedger(), "stream": newLedger(), "sqs": newLedger(), "kafka": newLedger(), "kafka-idem": newLedger()}
	var seq sync.Mutex
	n := 0
	next := func() int { seq.Lock(); defer seq.Unlock(); n++; return n }
	for round := 0; round <= kills; round++ {
		p := serve(t, 0, "--data-dir", dir, "--fsync", "always")
		if round == 0 {
			c := client.New("http://" + p.Addr("http"))
			for _, q := range []string{"kn", "kst", "ks"} {
				if _, err := c.CreateQueue(context.Background(), q, &sluicev1.QueueConfig{VisibilityTimeout: durationpb.New(2 * time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			for _, topic := range []string{"tk", "tki"} {
				if _, err := c.CreateTopic(context.Background(), topic, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		protos := []queueProto{nativeProto(p.Addr("http"), "kn"), streamProto(p.Addr("http"), "kst"), sqsProto(p.Addr("sqs"), "ks")}
		last := round == kills
		prodCtx, stopProducers := context.WithCancel(context.Background())
		consCtx, stopConsumers := context.WithCancel(context.Background())
		var producers, consumers sync.WaitGroup
		for _, q := range protos {
			producers.Go(func() { produceLoop(prodCtx, q, led[q.name], next) })
			idle := time.Duration(0)
			if last {
				idle = 5 * time.Second // past the 2 s visibility, so redeliveries are drained
			}
			consumers.Go(func() { consumeLoop(consCtx, q, led[q.name], idle) })
		}
		producers.Go(func() { kafkaLoop(prodCtx, p.Addr("kafka"), "tk", led["kafka"], next) })
		for range 4 { // four idempotent producers on tki's one partition
			producers.Go(func() { kafkaIdemLoop(prodCtx, p.Addr("kafka"), "tki", led["kafka-idem"], next) })
		}
		if !last {
			time.Sleep(load/2 + rand.N(load/2))
			p.Kill() // requests in flight on every protocol
			stopProducers()
			stopConsumers()
			producers.Wait()
			consumers.Wait()
			continue
		}
		time.Sleep(load)
		stopProducers()
		producers.Wait()
		consumers.Wait() // drained: idle past the visibility timeout
		stopConsumers()
		readTopic(t, p.Addr("kafka"), "tk", led["kafka"])
		readTopic(t, p.Addr("kafka"), "tki", led["kafka-idem"])
		p.Stop()
	}
	for _, name := range []string{"native", "stream", "sqs", "kafka", "kafka-idem"} {
		l := led[name]
		acked, lost, dups, sample := l.figures()
		t.Logf("%-6s kills %d: acked %d, lost %d, duplicates %d, delivered after a confirmed delete %d",
			name, kills, acked, lost, dups, len(l.resurrected))
		if acked == 0 {
			t.Errorf("%s: nothing was acknowledged; the load did not run", name)
		}
		if lost > 0 {
			t.Errorf("%s: %d acknowledged messages lost, e.g. %v", name, lost, sample)
		}
		if len(l.resurrected) > 0 {
			t.Errorf("%s: %d messages delivered after their delete was confirmed, e.g. %v", name, len(l.resurrected), l.resurrected[:min(5, len(l.resurrected))])
		}
	}
}
