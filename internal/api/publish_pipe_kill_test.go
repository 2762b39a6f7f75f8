package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/testproc"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// TestPublishPipelineKillOrder SIGKILLs the real binary (--fsync always)
// while one raw Publish stream has many requests in flight, placed ahead
// of their answers, SLUICE_PUBLISH_KILLS rounds (2 by default). Each
// request carries four records, two for each of two partitions, numbered
// in the order sent. While the stream runs, the answers must come in
// request order, each partition's offsets rising from answer to answer.
// After each restart every answered record is at its answered offset with
// its value, and each partition holds the round's records in the order
// sent with none missing before the last one there (what was placed and
// not answered may or may not be there, but only as the tail of the
// stream's order). It runs twice: with the records as records, and as
// two record batches the client built, one per partition.
func TestPublishPipelineKillOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	rounds := 2
	if v, err := strconv.Atoi(os.Getenv("SLUICE_PUBLISH_KILLS")); err == nil && v > 0 {
		rounds = v
	}
	bin := testproc.Build(t, t.TempDir())
	for _, batches := range []bool{false, true} {
		t.Run(fmt.Sprintf("batches=%v", batches), func(t *testing.T) { publishKillOrder(t, bin, rounds, batches) })
	}
}

func publishKillOrder(t *testing.T, bin string, rounds int, batches bool) {
	dir := t.TempDir()
	start := func() (*testproc.Proc, *client.Client) {
		p := testproc.Serve(t, bin, "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--kafka-addr", "",
			"--sqs-addr", "", "--fsync", "always")
		c := client.New("http://" + p.Addr("http"))
		waitReady(t, c)
		return p, c
	}
	proc, c := start()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "ord", &client.TopicConfig{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	answered := map[[2]int64]string{} // (partition, offset) -> value
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range rounds {
		got := publishOrdered(t, ctx, proc.Addr("http"), round, batches, func() {
			time.Sleep(time.Duration(150+rng.IntN(200)) * time.Millisecond)
			proc.Kill()
		})
		if len(got) == 0 {
			t.Fatalf("round %d: nothing answered before the kill: the test proves nothing", round)
		}
		for k, v := range got {
			answered[k] = v
		}
		t.Logf("round %d: %d records answered before the kill", round, len(got))
		proc, c = start()
		for part := range int32(2) {
			checkPartitionOrder(t, ctx, c, part, rounds, answered)
		}
	}
}

// publishOrdered writes requests on one stream without waiting until the
// stream breaks (kill ran), checking each answer as it comes, and returns
// the answered records. Request id carries records id*4 to id*4+3, record
// seq to partition seq%2: as four records, or (batches) as two batches,
// partition 0's then partition 1's, so result i is record entryOf(i).
func publishOrdered(t *testing.T, ctx context.Context, addr string, round int, batches bool, kill func()) map[[2]int64]string {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	s := sluicev1connect.NewStreamServiceClient(&http.Client{Transport: tr}, "http://"+addr).Publish(sctx)
	go func() {
		for id := uint64(0); sctx.Err() == nil; id++ {
			req := &sluicev1.PublishRequest{Id: id, Destination: &sluicev1.PublishRequest_Topic{Topic: "ord"}}
			if batches {
				for part := range int32(2) {
					req.Batches = append(req.Batches, &sluicev1.RecordBatch{Partition: &part,
						Data: buildBatch(t, batch.Options{}, fmt.Sprintf("%d/%d", round, id*4+uint64(part)), fmt.Sprintf("%d/%d", round, id*4+uint64(part)+2))})
				}
			} else {
				for j := range int32(4) {
					part := j % 2
					req.Records = append(req.Records, &sluicev1.ProduceRecord{Partition: &part,
						Value: fmt.Appendf(nil, "%d/%d", round, id*4+uint64(j))})
				}
			}
			if s.Send(req) != nil {
				return // the stream broke
			}
		}
	}()
	type outcome struct {
		got map[[2]int64]string
		bad string // why an answer was wrong
		end error  // why the stream ended
	}
	done := make(chan outcome, 1)
	answering := make(chan struct{}) // closed at the first answer, or when the reader ends
	var once sync.Once
	answered := func() { once.Do(func() { close(answering) }) }
	go func() { // answers are read here, so that kill runs on the test's goroutine
		out := map[[2]int64]string{}
		defer answered()
		last := [2]int64{-1, -1}
		for want := uint64(0); ; want++ {
			resp, err := s.Receive()
			if err != nil {
				done <- outcome{got: out, end: err} // killed
				return
			}
			results := recordResults(resp)
			if resp.GetId() != want || resp.GetError() != nil || len(results) != 4 {
				done <- outcome{bad: fmt.Sprintf("round %d: answer %v, want request %d's four results, in request order", round, resp, want)}
				return
			}
			for i, r := range results {
				j := i // the record's place in the request
				if batches {
					j = i/2 + 2*(i%2)
				}
				rec := r.GetRecord()
				if r.GetError() != nil || rec.GetPartition() != int32(j%2) || rec.GetOffset() <= last[j%2] {
					done <- outcome{bad: fmt.Sprintf("round %d request %d entry %d: %v; partition %d was at offset %d already", round, want, i, r, j%2, last[j%2])}
					return
				}
				last[j%2] = rec.GetOffset()
				out[[2]int64{int64(j % 2), rec.GetOffset()}] = fmt.Sprintf("%d/%d", round, want*4+uint64(j))
			}
			answered()
		}
	}()
	// The kill's delay runs from the first answer, not from the stream's
	// start: on a loaded machine the first fsync can take longer than the
	// delay, and a round with nothing answered proves nothing.
	select {
	case <-answering:
	case <-time.After(time.Minute):
	}
	kill()
	o := <-done
	if o.bad != "" {
		t.Fatal(o.bad)
	}
	if len(o.got) == 0 {
		t.Logf("round %d: the stream ended before any answer: %v", round, o.end)
	}
	return o.got
}

// checkPartitionOrder reads partition part whole: every answered record of
// it is at its offset, and each round's records are there in the order
// sent, from that round's first, without a gap.
func checkPartitionOrder(t *testing.T, ctx context.Context, c *client.Client, part int32, rounds int, answered map[[2]int64]string) {
	t.Helper()
	got := map[int64]string{}
	next := make([]uint64, rounds) // per round: the sequence number due next in this partition
	for r := range next {
		next[r] = uint64(part)
	}
	for off := int64(0); ; {
		f, err := c.Fetch(ctx, &client.FetchRequest{Topic: "ord", MaxRecords: 5000,
			Partitions: []*client.PartitionOffset{{Partition: part, Offset: off}}})
		if err != nil {
			t.Fatal(err)
		}
		p := f.GetPartitions()[0]
		for _, r := range p.GetRecords() {
			v := string(r.GetValue())
			got[r.GetOffset()] = v
			var round int
			var seq uint64
			if _, err := fmt.Sscanf(v, "%d/%d", &round, &seq); err != nil || round >= rounds {
				t.Fatalf("partition %d offset %d: %q", part, r.GetOffset(), v)
			}
			if seq != next[round] {
				t.Fatalf("partition %d offset %d: record %d of round %d where %d was due: the log lost the stream's order or a record before this one",
					part, r.GetOffset(), seq, round, next[round])
			}
			next[round] += 2
		}
		if p.GetNextOffset() <= off || p.GetNextOffset() >= p.GetHighWatermark() {
			break
		}
		off = p.GetNextOffset()
	}
	for k, v := range answered {
		if k[0] == int64(part) && got[k[1]] != v {
			t.Fatalf("partition %d offset %d: log has %q, the answer was for %q", part, k[1], got[k[1]], v)
		}
	}
}
