package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaHandler collects what a Sarama consumer group member consumes and
// marks each message, so the group commits it.
type saramaHandler struct {
	mu   sync.Mutex
	got  []string
	want int
	done chan struct{}
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.got = append(h.got, string(m.Key)+":"+string(m.Value))
		if len(h.got) == h.want {
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

// TestSarama: a sync producer with keyed messages, then a consumer group
// that reads them all back, per-key order intact, and commits; at the
// protocol versions of an old Kafka (1.0), Sarama's default (2.1), a
// recent one (3.6) and the newest Sarama speaks (sarama.MaxVersion).
func TestSarama(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.V1_0_0_0, sarama.V2_1_0_0, sarama.V3_6_0_0, sarama.MaxVersion} {
		t.Run(v.String(), func(t *testing.T) { testSarama(t, v) })
	}
}

func testSarama(t *testing.T, version sarama.KafkaVersion) {
	n := startNode(t, "")
	n.createTopic("sarama", 3)
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 10 * time.Millisecond

	prod, err := sarama.NewSyncProducer([]string{n.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const count = 300
	var want []string
	for i := range count {
		k, v := fmt.Sprintf("key%d", i%11), fmt.Sprintf("v%d", i)
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, k+":"+v)
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}

	cg, err := sarama.NewConsumerGroup([]string{n.addr}, "sgroup", cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &saramaHandler{want: count, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(testCtx(t, 60*time.Second))
	errc := make(chan error, 1)
	go func() {
		var err error
		for ctx.Err() == nil && err == nil {
			err = cg.Consume(ctx, []string{"sarama"}, h)
		}
		errc <- err
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatalf("consumed %d of %d", len(h.got), count)
	}
	cancel()
	if err := <-errc; err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	checkPerKeyOrder(t, want, h.got)
	h.mu.Unlock()
	var committed int64
	for p := range int32(3) {
		c, _ := n.b.FetchOffset("sgroup", "sarama", p)
		committed += c.Offset
	}
	if committed != count {
		t.Errorf("group committed %d records, want %d", committed, count)
	}
}
