package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// The streams kill test's child: with SLUICE_STREAMS_KILL_DIR set,
// TestStreamsKillChild runs producers and a consumer group against a broker
// in that directory and prints what the broker acknowledged: "produced
// <partition> <offset> <value>" for every record of a Produce that returned,
// "committed <partition> <offset>" for every partition of a CommitOffsets
// that returned without error for it.
const streamsKillEnv = "SLUICE_STREAMS_KILL_DIR"

const (
	killTopic      = "kill"
	killGroup      = "g"
	killPartitions = 4
)

func TestStreamsKillChild(t *testing.T) {
	dir := os.Getenv(streamsKillEnv)
	if dir == "" {
		t.Skip("run by TestStreamsKill9 as its child process")
	}
	// A small snapshot interval: the group journal is snapshotted and
	// trimmed while commits run, so kills land in those too.
	b, err := Open(Options{Dir: dir, Logger: quietLogger(), SnapshotEvery: 200})
	if err != nil {
		fmt.Println("open-failed", err)
		os.Exit(2)
	}
	_, err = b.CreateTopic(TopicSettings{Name: killTopic, Partitions: killPartitions})
	if err != nil && !errors.Is(err, ErrTopicExists) {
		fmt.Println("create-failed", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex // guards out
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	fail := func(what string, err error) {
		mu.Lock()
		fmt.Fprintln(out, what, err)
		out.Flush()
		os.Exit(3)
	}
	ctx := context.Background()
	pid := os.Getpid() // values are unique across the parent's cycles
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() { // producer
			rng := rand.New(rand.NewPCG(uint64(pid), uint64(w)))
			for i := range 1_000_000 {
				recs := make([]ProduceRecord, 1+rng.IntN(5))
				for k := range recs {
					recs[k] = ProduceRecord{
						Key:   fmt.Appendf(nil, "key-%d", rng.IntN(64)),
						Value: fmt.Appendf(nil, "p%d-w%d-%d-%d", pid, w, i, k),
					}
				}
				res, err := b.Produce(ctx, killTopic, recs, ProduceOptions{})
				if err != nil {
					fail("produce-failed", err)
				}
				for k, r := range res {
					say("produced %d %d %s", r.Partition, r.Offset, recs[k].Value)
				}
			}
		})
	}
	for c := range 2 {
		wg.Go(func() { killConsumer(ctx, b, fmt.Sprintf("c%d", c), say, fail) })
	}
	wg.Wait()
}

// killConsumer is one member of the child's group: it joins, reads each
// assigned partition from the group's committed offset, commits what it
// read, and rejoins when the group rebalances.
func killConsumer(ctx context.Context, b *Broker, client string, say func(string, ...any), fail func(string, error)) {
	var a ConsumerAssignment
	pos := map[int32]int64{} // next offset to read, per assigned partition
	join := func() {
		for range 100 {
			var err error
			a, err = b.JoinConsumer(ctx, ConsumerJoin{Group: killGroup, MemberID: a.MemberID, ClientID: client,
				Topics: []string{killTopic}, SessionTimeout: testSession})
			switch {
			case err == nil:
				clear(pos)
				for _, tp := range a.Partitions {
					for _, p := range tp.Partitions {
						pos[p] = 0
						if c, ok := b.FetchOffset(killGroup, killTopic, p); ok {
							pos[p] = c.Offset
						}
					}
				}
				return
			case errors.Is(err, group.ErrUnknownMember):
				a.MemberID = ""
			case errors.Is(err, group.ErrRebalanceInProgress):
				// superseded by a newer join of ours: join again
			default:
				fail("join-failed", err)
			}
		}
		fail("join-failed", errors.New("100 joins without an assignment"))
	}
	fenced := func(err error) bool {
		return errors.Is(err, group.ErrRebalanceInProgress) || errors.Is(err, group.ErrIllegalGeneration) ||
			errors.Is(err, group.ErrUnknownMember)
	}
	join()
	for range 1_000_000 {
		if err := b.Heartbeat(group.HeartbeatRequest{Group: killGroup, MemberID: a.MemberID, Generation: a.Generation}); err != nil {
			if !fenced(err) {
				fail("heartbeat-failed", err)
			}
			join()
			continue
		}
		var commits []group.OffsetCommit
		for p, from := range pos {
			res, err := b.Fetch(ctx, killTopic, p, from, FetchOptions{MaxBytes: 4096, MinBytes: 1, MaxWait: 10 * time.Millisecond})
			if err != nil {
				fail("fetch-failed", fmt.Errorf("%d@%d: %w", p, from, err))
			}
			recs, err := decodeRecords(res.Batches)
			if err != nil {
				fail("decode-failed", err)
			}
			next := from
			for _, r := range recs {
				if r.Offset >= next {
					next = r.Offset + 1
				}
			}
			if next > from {
				commits = append(commits, group.OffsetCommit{Topic: killTopic, Partition: p, Offset: next, LeaderEpoch: -1})
			}
		}
		if len(commits) == 0 {
			continue
		}
		errs, err := b.CommitOffsets(ctx, group.CommitRequest{Group: killGroup, MemberID: a.MemberID, Generation: a.Generation, Offsets: commits})
		if err != nil {
			if !fenced(err) {
				fail("commit-failed", err)
			}
			join()
			continue
		}
		rejoin := false
		for i, o := range commits {
			switch {
			case errs[i] == nil:
				say("committed %d %d", o.Partition, o.Offset)
				pos[o.Partition] = o.Offset
			case fenced(errs[i]) || errors.Is(errs[i], group.ErrNotAssigned):
				rejoin = true
			default:
				fail("commit-failed", errs[i])
			}
		}
		if rejoin {
			join()
		}
	}
}

// decodeRecords returns the records of whole batches, back to back.
func decodeRecords(data []byte) ([]batch.Record, error) {
	var out []batch.Record
	for len(data) > 0 {
		n, err := batch.FrameSize(data)
		if err != nil {
			return nil, err
		}
		for r, err := range batch.Records(data[:n]) {
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		data = data[n:]
	}
	return out, nil
}

// streamsLedger is what the children acknowledged, across all cycles.
type streamsLedger struct {
	records   [killPartitions]map[int64]string // acknowledged produce: offset -> value
	committed [killPartitions]int64            // highest acknowledged commit
	reopened  [killPartitions]int64            // committed offset at the last reopen
	commits   int                              // acknowledged commits
}

// TestStreamsKill9: kill -9 a broker under produce and group-consume load,
// reopen it and check: every acknowledged record is at its partition and
// offset with its value, every acknowledged commit is at or below the
// group's committed offset, and committed offsets never go backwards from
// one reopen to the next.
func TestStreamsKill9(t *testing.T) {
	if os.Getenv(streamsKillEnv) != "" {
		t.Skip("child")
	}
	// Alongside the other kill test, after the package's sequential tests: each cycle
	// mostly waits (a child's start, its run until the kill), and the two share nothing
	// (own directories, the child told its own through its environment).
	t.Parallel()
	cycles := 20
	if testing.Short() {
		cycles = 5
	}
	dir := t.TempDir()
	led := &streamsLedger{}
	for p := range led.records {
		led.records[p] = map[int64]string{}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	deadline := time.Now().Add(60 * time.Second)
	c := 0
	for ; c < cycles && time.Now().Before(deadline); c++ {
		d := time.Duration(20+rng.IntN(181)) * time.Millisecond
		runKillChild(t, "TestStreamsKillChild", streamsKillEnv, dir, d, func(line string) { led.record(t, line) })
		led.check(t, dir, c)
	}
	n := 0
	for _, m := range led.records {
		n += len(m)
	}
	if n == 0 || led.commits == 0 {
		t.Fatalf("the children acknowledged %d records and %d commits: nothing was tested", n, led.commits)
	}
	t.Logf("%d cycles: %d produced records and %d commits acknowledged and checked; committed offsets %v",
		c, n, led.commits, led.reopened)
}

func (l *streamsLedger) record(t *testing.T, line string) {
	f := strings.Fields(line)
	var p, off int64
	var err error
	if len(f) >= 3 {
		p, err = strconv.ParseInt(f[1], 10, 32)
		if err == nil && (p < 0 || p >= killPartitions) {
			err = fmt.Errorf("no partition %d", p)
		}
		if err == nil {
			off, err = strconv.ParseInt(f[2], 10, 64)
		}
	}
	switch {
	case err != nil:
		t.Fatalf("child said %q: %v", line, err)
	case len(f) == 4 && f[0] == "produced":
		if old, ok := l.records[p][off]; ok {
			t.Fatalf("offset %d/%d acknowledged twice: %q, then %q", p, off, old, f[3])
		}
		l.records[p][off] = f[3]
	case len(f) == 3 && f[0] == "committed":
		// A new child's consumers start at the committed offset they find,
		// so no commit may be below the one the last reopen saw.
		if off < l.reopened[p] {
			t.Fatalf("partition %d: commit of %d acknowledged, yet %d was committed before this child started", p, off, l.reopened[p])
		}
		l.committed[p] = max(l.committed[p], off)
		l.commits++
	default:
		t.Fatalf("child said %q", line)
	}
}

// check opens the broker on what the killed child left and checks the
// ledger against it.
func (l *streamsLedger) check(t *testing.T, dir string, cycle int) {
	b, err := Open(Options{Dir: dir, FS: vfs.Default, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("cycle %d: reopen after kill: %v", cycle, err)
	}
	defer b.Close()
	ctx := context.Background()
	for p := range int32(killPartitions) {
		start, err := b.ListOffsets(killTopic, p, OffsetEarliest)
		if err != nil {
			t.Fatalf("cycle %d: partition %d: %v", cycle, p, err)
		}
		end, err := b.ListOffsets(killTopic, p, OffsetLatest)
		if err != nil {
			t.Fatalf("cycle %d: partition %d: %v", cycle, p, err)
		}
		stored := map[int64]string{}
		off := start.Offset
		for range end.Offset - start.Offset + 1 { // each round reads at least one record
			if off >= end.Offset {
				break
			}
			res, err := b.Fetch(ctx, killTopic, p, off, FetchOptions{MaxBytes: 1 << 20})
			if err != nil {
				t.Fatalf("cycle %d: fetch %d@%d: %v", cycle, p, off, err)
			}
			recs, err := decodeRecords(res.Batches)
			if err != nil {
				t.Fatalf("cycle %d: fetch %d@%d: %v", cycle, p, off, err)
			}
			for _, r := range recs {
				if r.Offset >= off {
					stored[r.Offset] = string(r.Value)
					off = r.Offset + 1
				}
			}
		}
		if off < end.Offset {
			t.Fatalf("cycle %d: partition %d: read up to %d of %d", cycle, p, off, end.Offset)
		}
		for o, want := range l.records[p] {
			if got, ok := stored[o]; !ok || got != want {
				t.Fatalf("cycle %d: acknowledged record %q at %d/%d lost by kill -9: found %q (log %d..%d)",
					cycle, want, p, o, got, start.Offset, end.Offset)
			}
		}
		got, ok := b.FetchOffset(killGroup, killTopic, p)
		if !ok {
			got.Offset = 0
		}
		switch {
		case got.Offset < l.committed[p]:
			t.Fatalf("cycle %d: partition %d: committed offset %d after kill -9, a commit of %d was acknowledged",
				cycle, p, got.Offset, l.committed[p])
		case got.Offset < l.reopened[p]:
			t.Fatalf("cycle %d: partition %d: committed offset went back from %d to %d", cycle, p, l.reopened[p], got.Offset)
		case got.Offset > end.Offset:
			t.Fatalf("cycle %d: partition %d: committed offset %d is past the log's end %d", cycle, p, got.Offset, end.Offset)
		}
		l.reopened[p] = got.Offset
	}
}
