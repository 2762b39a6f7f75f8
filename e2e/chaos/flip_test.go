package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// flipData is what each flip round writes before the flip, through the
// real binary: 20 queue messages (3 received and acked, so the queue's
// journal has records), 20 topic records from an idempotent Kafka producer
// (producer state), a dead-letter queue with a finished redrive (a task
// file), and the catalog that names them all.
const (
	flipQueueMsgs   = 20
	flipQueueAcked  = 3
	flipTopicRecs   = 20
	flipQueueRemain = flipQueueMsgs - flipQueueAcked
)

func writeFlipData(t *testing.T, p interface{ Addr(string) string }) {
	t.Helper()
	ctx := context.Background()
	c := client.New("http://" + p.Addr("http"))
	if _, err := c.CreateQueue(ctx, "dlq", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueue(ctx, "q", &sluicev1.QueueConfig{VisibilityTimeout: durationpb.New(time.Second)}); err != nil {
		t.Fatal(err)
	}
	for i := range flipQueueMsgs {
		if _, err := c.Send(ctx, "q", []byte(fmt.Sprintf("m%02d", i))); err != nil { // a batch each
			t.Fatal(err)
		}
	}
	ms, err := c.Receive(ctx, "q", client.MaxMessages(flipQueueAcked))
	if err != nil || len(ms) != flipQueueAcked {
		t.Fatalf("receive: %d %v", len(ms), err)
	}
	for _, m := range ms {
		if err := c.Ack(ctx, "q", m.GetReceipt()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Send(ctx, "dlq", []byte("dead")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartRedrive(ctx, &client.StartRedriveRequest{DeadLetterQueue: "dlq", DestinationQueue: "dlq-out"}); err == nil {
		t.Fatal("a redrive to a missing queue started")
	}
	if _, err := c.CreateQueue(ctx, "dlq-out", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartRedrive(ctx, &client.StartRedriveRequest{DeadLetterQueue: "dlq", DestinationQueue: "dlq-out"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr("kafka")), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range flipTopicRecs {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(fmt.Sprintf("r%02d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// readFlipData counts what survived: distinct queue messages received
// (after their visibility ran out) and topic records fetched.
func readFlipData(t *testing.T, addr string) (queue, topic int) {
	t.Helper()
	// Bounded: a server that stops answering after a flip must fail this
	// test in seconds, naming the flip, not hang the package's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New("http://" + addr)
	seen := map[string]bool{}
	for empty := 0; empty < 2; {
		ms, err := c.Receive(ctx, "q", client.MaxMessages(100), client.Wait(1500*time.Millisecond))
		if err != nil {
			t.Fatalf("receive after the flip: %v", err)
		}
		if len(ms) == 0 {
			empty++
		}
		for _, m := range ms {
			seen[string(m.GetBody())] = true
			if err := c.Ack(ctx, "q", m.GetReceipt()); err != nil {
				t.Fatalf("ack after the flip: %v", err)
			}
		}
	}
	// A fetch ends at a damaged range; the next one, from the offset after
	// the last record, continues past it (as a Kafka consumer's does).
	for next := int64(0); ; {
		res, err := c.Fetch(ctx, &client.FetchRequest{Topic: "t", Partitions: []*sluicev1.PartitionOffset{{Partition: 0, Offset: next}}, MaxRecords: 1000})
		if err != nil {
			t.Fatalf("fetch after the flip: %v", err)
		}
		n := 0
		for _, pr := range res.GetPartitions() {
			for _, r := range pr.GetRecords() {
				n++
				next = r.GetOffset() + 1
			}
		}
		if n == 0 {
			break
		}
		topic += n
	}
	return len(seen), topic
}

// fileKinds names the files of each kind in a data directory.
var fileKinds = []struct {
	kind  string
	match func(rel string) bool
}{
	{"queue segment", func(r string) bool { return strings.Contains(r, "-q/log/") && strings.HasSuffix(r, ".log") }},
	{"topic segment", func(r string) bool { return strings.HasPrefix(r, "topics/") && strings.HasSuffix(r, ".log") }},
	{"index", func(r string) bool { return strings.HasSuffix(r, ".index") || strings.HasSuffix(r, ".timeindex") }},
	{"journal", func(r string) bool { return strings.Contains(r, "-q/journal/") && strings.HasSuffix(r, ".log") }},
	{"snapshot", func(r string) bool { return strings.HasSuffix(r, "/snapshot") || strings.HasSuffix(r, "/snapshot.1") }},
	{"settings", func(r string) bool { return strings.HasSuffix(r, "settings.json") || r == "ids.json" }},
	{"producer state", func(r string) bool { return strings.HasSuffix(r, "producers.snapshot") }},
	{"redrive task", func(r string) bool { return strings.HasPrefix(r, "redrives/") && strings.HasSuffix(r, ".json") }},
	{"quarantine list", func(r string) bool { return strings.HasSuffix(r, "quarantine.json") }},
}

// One flipped byte in each kind of file, at random positions, after a clean
// stop: the server starts, every other kind of data is intact, and what the
// flip cost is at most the batch or record it hit. Each round prints the
// kind, the byte, and what was lost. Short form: 2 positions per kind;
// SLUICE_CHAOS_LONG=1: 12. The broker snapshots every 10 journal events
// (--snapshot-every), so there are snapshots to flip.
func TestFlippedByteCostsOnlyItsBatch(t *testing.T) {
	rounds := 2
	if long() {
		rounds = 12
	}
	for _, fk := range fileKinds {
		for round := range rounds {
			t.Run(fmt.Sprintf("%s/%d", fk.kind, round), func(t *testing.T) {
				dir := t.TempDir()
				p := serve(t, 0, flipFlags(dir)...)
				writeFlipData(t, p)
				p.Stop()
				if fk.kind == "quarantine list" {
					// The list exists once something was damaged: damage a
					// queue batch, and let a restart find and record it
					// (a queue reads the head of its log at open).
					damageQueueBatch(t, dir)
					p = serve(t, 0, flipFlags(dir)...)
					p.Stop()
				}
				files := findData(t, dir, fk.match)
				if len(files) == 0 {
					t.Fatalf("no %s file to flip in this data", fk.kind)
				}
				path := files[rand.N(len(files))]
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				at := rand.N(len(data))
				data[at] ^= byte(1 << rand.N(8))
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				p = serve(t, 0, flipFlags(dir)...)
				queue, topic := readFlipData(t, p.Addr("http"))
				status, report := get(p.Addr("http"), "/v1/admin/corruption")
				_, metrics := get(p.Addr("http"), "/metrics")
				corrupt := plainMetric(metrics, "sluice_storage_corrupt_batches_total")
				rel, _ := filepath.Rel(dir, path)
				t.Logf("flipped byte %d of %d in %s: queue lost %d of %d (acked ones back: %d), topic lost %d of %d, corrupt batches %v",
					at, len(data), rel, max(0, flipQueueRemain-queue), flipQueueRemain, max(0, queue-flipQueueRemain),
					flipTopicRecs-topic, flipTopicRecs, corrupt)
				if status != 200 || !strings.Contains(report, "corrupt_batches_total") {
					t.Errorf("admin corruption report: %d %s", status, report)
				}
				budget := 1 // a batch holds one message
				if fk.kind == "quarantine list" {
					budget = 2 // and the batch damaged on purpose before
				}
				if lost := flipQueueRemain - queue; lost > budget {
					t.Errorf("the queue lost %d messages to one flipped byte (a batch holds one)", lost)
				}
				if lost := flipTopicRecs - topic; lost > 1 {
					t.Errorf("the topic lost %d records to one flipped byte (a batch holds one)", lost)
				}
				p.Stop()
			})
		}
	}
}

// damageQueueBatch flips a byte in the middle of the queue's segment.
func damageQueueBatch(t *testing.T, dir string) {
	t.Helper()
	segs := findData(t, dir, fileKinds[0].match)
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func flipFlags(dir string) []string {
	return []string{"--data-dir", dir, "--fsync", "always", "--snapshot-every", "10"}
}

// findData lists the files under dir that match, by their path relative to dir.
func findData(t *testing.T, dir string, match func(rel string) bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if rel, _ := filepath.Rel(dir, path); err == nil && info.Size() > 0 && match(rel) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// plainMetric finds an unlabelled sample in a /metrics body; -1 if absent.
func plainMetric(body, name string) float64 {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}
