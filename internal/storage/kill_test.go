package storage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// The kill test's child: when SLUICE_KILL_CHILD_DIR is set, TestKillChild
// appends batches from several goroutines to the log in that directory and
// prints "ack <offset> <value>" for every append the log acknowledged, until
// the parent kills it.
const killChildEnv = "SLUICE_KILL_CHILD_DIR"

// killChildPreallocEnv, when set, makes the child preallocate (a few times per
// segment), so kills land in zero-filled space and recovery must cut it.
const killChildPreallocEnv = "SLUICE_KILL_CHILD_PREALLOC"

func TestKillChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("run by TestKill9 as its child process")
	}
	o := Options{Dir: dir, SegmentBytes: 64 << 10} // small segments: rolls happen under fire
	if os.Getenv(killChildPreallocEnv) != "" {
		o.PreallocateBytes = 16 << 10
	}
	l, err := Open(o)
	if err != nil {
		fmt.Println("open-failed", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex // guards out
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				n := 1 + (i+w)%4
				recs := make([]batch.Record, n)
				for k := range recs {
					recs[k] = batch.Record{Timestamp: time.Now().UnixMilli(), Value: fmt.Appendf(nil, "w%d-i%d-k%d-%s", w, i, k, strings.Repeat("x", 200))}
				}
				b, err := batch.Build(recs, batch.Options{})
				if err != nil {
					panic(err)
				}
				offs, err := l.Append(context.Background(), b)
				if err != nil {
					fmt.Println("append-failed", err)
					os.Exit(3)
				}
				mu.Lock()
				for k := range recs {
					fmt.Fprintf(out, "ack %d %s\n", offs[0]+int64(k), recs[k].Value)
				}
				out.Flush() // the parent must see an ack before the next append can be killed
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestKill9 kills a process that appends under SyncAlways at random moments,
// reopens the log and checks that every acknowledged record reads back byte
// for byte and that the log holds only whole batches. The cycles share one
// directory, so each recovery starts from the previous one's result.
func TestKill9(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("child")
	}
	cycles := 200
	if testing.Short() {
		cycles = 20
	}
	dir := t.TempDir()
	acked := map[int64][]byte{}
	rng := rand.New(rand.NewPCG(1, 2))
	deadline := time.Now().Add(3 * time.Minute)
	from := int64(0) // records below were verified after an earlier kill
	zeroTails := 0
	for c := 0; c < cycles && time.Now().Before(deadline); c++ {
		// Odd cycles preallocate: the directory is shared, so every kind of
		// tail (zeros or not) is also reopened by the other kind of child.
		runAndKill(t, dir, time.Duration(5+rng.IntN(60))*time.Millisecond, c%2 == 1, acked)
		if endsInZeros(t, dir) {
			zeroTails++
		}
		from = verifyAcked(t, dir, acked, from)
	}
	verifyAcked(t, dir, acked, 0) // and once more, everything
	t.Logf("%d acknowledged records survived every kill; %d kills left a preallocated tail to cut", len(acked), zeroTails)
	if zeroTails == 0 {
		t.Error("no kill left preallocated zeros behind: recovery of a zero tail went untested")
	}
}

// endsInZeros reports whether the last segment of the log in dir ends in
// zero bytes, as a preallocating log killed between appends leaves it.
func endsInZeros(t *testing.T, dir string) bool {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, n := range names {
		if strings.HasSuffix(n.Name(), logSuffix) {
			last = n.Name() // sorted: zero-padded base offsets
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, last))
	if err != nil || len(data) < 64 {
		return false
	}
	return bytes.Count(data[len(data)-64:], []byte{0}) == 64
}

// runAndKill starts the child, lets it append for about d, SIGKILLs it, and
// adds what it acknowledged to acked.
func runAndKill(t *testing.T, dir string, d time.Duration, prealloc bool, acked map[int64][]byte) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	if prealloc {
		cmd.Env = append(cmd.Env, killChildPreallocEnv+"=1")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// Wait for the first ack (the child is up), let it run for d, kill it,
	// then drain what it printed before it died.
	guard := time.NewTimer(10 * time.Second)
	defer guard.Stop()
	var kill <-chan time.Time
	armed := false
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				return
			}
			if !armed {
				armed, kill = true, time.After(d)
			}
			recordAck(t, line, acked)
		case <-kill:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			kill = nil
		case <-guard.C:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("child printed no ack within 10 s")
		}
	}
}

func recordAck(t *testing.T, line string, acked map[int64][]byte) {
	t.Helper()
	fields := strings.SplitN(line, " ", 3)
	if len(fields) != 3 || fields[0] != "ack" {
		t.Fatalf("child said %q", line)
	}
	off, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatalf("child said %q", line)
	}
	if prev, ok := acked[off]; ok && !bytes.Equal(prev, []byte(fields[2])) {
		t.Fatalf("offset %d acknowledged twice with different records: %q and %q", off, prev, fields[2])
	}
	acked[off] = []byte(fields[2])
}

// verifyAcked reopens the log, reads it from offset from and checks every
// acked record at or above from; it returns the high watermark, where the
// next check can start (recovery only ever cuts the unsynced tail).
func verifyAcked(t *testing.T, dir string, acked map[int64][]byte, from int64) int64 {
	t.Helper()
	l, err := Open(Options{Dir: dir, SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer l.Close()
	seen := map[int64][]byte{}
	for pos := max(from, l.LogStartOffset()); pos < l.HighWatermark(); {
		data, err := l.Read(pos, 1<<20)
		if err != nil {
			t.Fatalf("read at %d after kill: %v", pos, err)
		}
		next := pos
		for len(data) > 0 {
			n, err := batch.FrameSize(data)
			if err != nil {
				t.Fatalf("frame at %d: %v", pos, err)
			}
			if err := batch.Validate(data[:n], 1<<20); err != nil {
				t.Fatalf("half-visible batch after kill: %v", err)
			}
			for r, err := range batch.Records(data[:n]) {
				if err != nil {
					t.Fatal(err)
				}
				seen[r.Offset] = bytes.Clone(r.Value)
				next = r.Offset + 1
			}
			data = data[n:]
		}
		pos = next
	}
	for off, want := range acked {
		if off < from {
			continue
		}
		if got, ok := seen[off]; !ok || !bytes.Equal(got, want) {
			t.Fatalf("acknowledged offset %d lost or changed after kill -9: got %q", off, got)
		}
	}
	return l.HighWatermark()
}
