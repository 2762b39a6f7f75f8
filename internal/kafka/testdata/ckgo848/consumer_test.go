// Package ckgo848 drives librdkafka, as confluent-kafka-go bundles it,
// with group.protocol=consumer (KIP-848) against a sluice broker that the
// test in internal/kafka (kip848_librdkafka_test.go) starts. It is a
// module of its own so that cgo and the bundled librdkafka stay out of
// sluice's build.
package ckgo848

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

type seen struct {
	mu    sync.Mutex
	count map[string]int
	order []string
}

func (s *seen) add(p int32, off kafka.Offset) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%d/%d", p, off)
	s.count[k]++
	s.order = append(s.order, k)
}

func (s *seen) unique() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.count)
}

type member struct {
	c    *kafka.Consumer
	stop chan struct{}
	done chan struct{}
}

func env(t *testing.T, name string) string {
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s not set: run through internal/kafka's TestKIP848Librdkafka", name)
	}
	return v
}

func start(t *testing.T, s *seen) *member {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  env(t, "SLUICE_KAFKA_ADDR"),
		"group.id":           env(t, "SLUICE_GROUP"),
		"group.protocol":     "consumer",
		"auto.offset.reset":  "earliest",
		"enable.auto.commit": true,
		// Offsets are stored by hand, once a record is recorded: with
		// automatic storing, the records that Close polls and drops (it
		// serves the queue until the consumer is closed) would be stored
		// and committed unseen, which is loss in the client, not the broker.
		"enable.auto.offset.store":           false,
		"auto.commit.interval.ms":            100,
		"fetch.wait.max.ms":                  100,
		"topic.metadata.refresh.interval.ms": 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(env(t, "SLUICE_TOPIC"), nil); err != nil {
		t.Fatal(err)
	}
	m := &member{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			switch e := c.Poll(100).(type) {
			case *kafka.Message:
				if e.TopicPartition.Error == nil {
					s.add(e.TopicPartition.Partition, e.TopicPartition.Offset)
					if _, err := c.StoreMessage(e); err != nil {
						t.Logf("store %v: %v", e.TopicPartition, err)
					}
				}
			case kafka.Error:
				t.Logf("librdkafka: %v", e)
			}
		}
	}()
	return m
}

// close stops polling, commits what was consumed and leaves the group.
func (m *member) close(t *testing.T) {
	close(m.stop)
	<-m.done
	if _, err := m.c.Commit(); err != nil && !strings.Contains(err.Error(), "No offset stored") {
		t.Logf("final commit: %v", err)
	}
	if err := m.c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func waitUnique(t *testing.T, s *seen, want int, d time.Duration) {
	deadline := time.Now().Add(d)
	for s.unique() < want {
		if time.Now().After(deadline) {
			write(t, s) // what was consumed, for the caller to show
			t.Fatalf("%d of %d records consumed", s.unique(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func write(t *testing.T, s *seen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.WriteFile(env(t, "SLUICE_OUT"), []byte(strings.Join(s.order, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChurn: three members, then four times one leaves and one joins
// while records arrive, until SLUICE_TOTAL distinct records were consumed;
// every consumed partition/offset goes to SLUICE_OUT.
func TestChurn(t *testing.T) {
	total, _ := strconv.Atoi(env(t, "SLUICE_TOTAL"))
	s := &seen{count: map[string]int{}}
	var ms []*member
	for range 3 {
		ms = append(ms, start(t, s))
	}
	for range 4 {
		time.Sleep(time.Second)
		ms[0].close(t)
		ms = append(ms[1:], start(t, s))
	}
	waitUnique(t, s, total, 60*time.Second)
	for _, m := range ms {
		m.close(t)
	}
	write(t, s)
	t.Logf("librdkafka %s: %d records, %d deliveries", kafkaVersion(), total, len(s.order))
}

// TestResume: one member reads what the group did not consume yet
// (SLUICE_TOTAL records), then waits a second for anything more.
func TestResume(t *testing.T) {
	total, _ := strconv.Atoi(env(t, "SLUICE_TOTAL"))
	s := &seen{count: map[string]int{}}
	m := start(t, s)
	waitUnique(t, s, total, 40*time.Second)
	time.Sleep(time.Second)
	m.close(t)
	write(t, s)
}

func kafkaVersion() string {
	_, v := kafka.LibraryVersion()
	return v
}
