// Command queuebench measures the work-queue core in-process (no network
// protocol): producers send 1 KiB messages while consumers receive and ack
// them, fsync=always, with 1, 4 and 16 consumers, single messages and batches
// of 10, next to the disk's fdatasync rate measured in the same run. With
// -backlog N it also reports resident memory of the broker with an empty
// queue and with N messages waiting (memory must not grow with the backlog).
//
//	go run ./bench/queuebench -duration 3s
//	go run ./bench/queuebench -backlog 10000000 -matrix=false
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/diskprobe"
	"github.com/sluice-mq/sluice/internal/storage"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the broker's data (a temporary folder is made inside)")
	dur := flag.Duration("duration", 3*time.Second, "how long each cell runs")
	matrix := flag.Bool("matrix", true, "run the consumers x batch throughput matrix")
	backlog := flag.Int("backlog", 0, "also measure resident memory with this many messages waiting")
	fsync := flag.String("fsync", "always", "storage sync policy: always, never or an interval such as 5ms (targets are for always)")
	flag.Int64Var(&prealloc, "prealloc", broker.DefaultPreallocateBytes, "zero-fill each log this far ahead of appends (-1: off)")
	flag.IntVar(&backlogBody, "backlog-body", 1024, "body size of the -backlog messages")
	flag.IntVar(&bound, "bound", 1024, "producers keep at most this many messages sent and not yet acked, so a run measures the\nsustained rate through the queue rather than how fast producers can grow a backlog (0: no bound)")
	only := flag.String("only", "", "run one cell of the matrix, as consumers x batch (e.g. 16x10)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the matrix to this file")
	flag.Parse()
	policy, err := storage.ParseSyncPolicy(*fsync)
	if err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(2)
	}
	syncPolicy = policy
	if *only != "" {
		if _, err := fmt.Sscanf(*only, "%dx%d", &onlyConsumers, &onlyBatch); err != nil {
			fmt.Fprintln(os.Stderr, "queuebench: -only wants consumers x batch, such as 16x10")
			os.Exit(2)
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "queuebench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*dir, *dur, *matrix, *backlog); err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(parent string, dur time.Duration, matrix bool, backlog int) error {
	dir, err := os.MkdirTemp(parent, "queuebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	limits, err := diskprobe.Measure(dir, 2*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("disk: %s\n\n", limits)
	if matrix {
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "consumers\tbatch\tmsgs/s (send+receive+ack)\tper probed fdatasync\tfdatasyncs/s in run\tavg fdatasync µs\t")
		for _, consumers := range []int{1, 4, 16} {
			for _, size := range []int{1, 10} {
				if onlyConsumers > 0 && (consumers != onlyConsumers || size != onlyBatch) {
					continue
				}
				var obs syncCounter
				n, err := roundTrip(dir, consumers, size, dur, &obs)
				if err != nil {
					return err
				}
				rate := float64(n) / dur.Seconds()
				syncs := obs.syncs.Load()
				fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t\n", consumers, size, rate, rate/limits.FdatasyncPerSec,
					float64(syncs)/dur.Seconds(), float64(obs.ns.Load())/float64(max(syncs, 1))/1e3)
			}
		}
		tw.Flush()
	}
	if backlog > 0 {
		return memory(dir, backlog)
	}
	return nil
}

// Settings from flags: -bound, -prealloc, -fsync and -only.
var (
	bound, backlogBody       int
	prealloc                 int64
	syncPolicy               storage.SyncPolicy
	onlyConsumers, onlyBatch int
)

func open(dir string, obs storage.Observer) (*broker.Broker, error) {
	return broker.Open(broker.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler), StorageObserver: obs, Sync: syncPolicy,
		PreallocateBytes: prealloc})
}

// syncCounter counts the fdatasyncs and group-committed appends of a run.
type syncCounter struct{ syncs, appends, ns atomic.Int64 }

func (c *syncCounter) ObserveFsync(d time.Duration)   { c.syncs.Add(1); c.ns.Add(int64(d)) }
func (c *syncCounter) ObserveCommitBatch(appends int) { c.appends.Add(int64(appends)) }

// roundTrip runs as many producers as consumers for dur and returns how many
// messages were acked.
func roundTrip(parent string, consumers, size int, dur time.Duration, obs storage.Observer) (int64, error) {
	dir, err := os.MkdirTemp(parent, "rt-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	b, err := open(dir, obs)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	if _, err := b.CreateQueue(broker.QueueSettings{Name: "bench"}); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	body := make([]byte, 1024)
	var acked atomic.Int64
	// credits holds one token per message sent and not yet acked (-bound).
	var credits chan struct{}
	if bound > 0 {
		credits = make(chan struct{}, bound)
	}
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	fail := func(err error) {
		if ctx.Err() == nil {
			once.Do(func() { firstErr = err })
		}
	}
	for range consumers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			in := make([]broker.SendInput, size)
			for i := range in {
				in[i] = broker.SendInput{Body: body}
			}
			for ctx.Err() == nil {
				for range len(in) {
					if credits == nil {
						break
					}
					select {
					case credits <- struct{}{}:
					case <-ctx.Done():
						return
					}
				}
				if _, err := b.Send(ctx, "bench", in); err != nil {
					fail(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				ds, err := b.Receive(ctx, "bench", broker.ReceiveOptions{Max: size, Wait: 100 * time.Millisecond})
				if err != nil {
					fail(err)
					return
				}
				if len(ds) == 0 {
					continue
				}
				receipts := make([]string, len(ds))
				for i, d := range ds {
					receipts[i] = d.Receipt
				}
				if size == 1 {
					err = b.Ack(context.Background(), "bench", receipts[0])
				} else {
					_, err = b.AckBatch(context.Background(), "bench", receipts)
				}
				if err != nil {
					fail(err)
					return
				}
				acked.Add(int64(len(ds)))
				if credits != nil {
					for range len(ds) {
						<-credits
					}
				}
			}
		}()
	}
	wg.Wait()
	return acked.Load(), firstErr
}

// memory reports resident memory and live heap with an empty queue, with n
// messages waiting, and after reopening the broker over that backlog. The
// empty figure is taken after warmup messages went through the queue (sent,
// received, acked), so both figures are of a broker that has worked; the
// figure of the fresh broker is printed too.
func memory(parent string, n int) error {
	dir, err := os.MkdirTemp(parent, "mem-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := open(dir, nil)
	if err != nil {
		return err
	}
	if _, err := b.CreateQueue(broker.QueueSettings{Name: "backlog"}); err != nil {
		return err
	}
	fresh := measure()
	fmt.Printf("\n%-42s %s\n", "fresh broker, empty queue:", fresh)
	const warmup = 100_000
	if err := sendN(b, warmup); err != nil {
		return err
	}
	for got := 0; got < warmup; {
		ds, err := b.Receive(context.Background(), "backlog", broker.ReceiveOptions{Max: 1000})
		if err != nil {
			return err
		}
		receipts := make([]string, len(ds))
		for i, d := range ds {
			receipts[i] = d.Receipt
		}
		if _, err := b.AckBatch(context.Background(), "backlog", receipts); err != nil {
			return err
		}
		got += len(ds)
	}
	settle(b)
	empty := measure()
	fmt.Printf("%-42s %s\n", fmt.Sprintf("empty queue, %d messages through it:", warmup), empty)
	start := time.Now()
	if err := sendN(b, n); err != nil {
		return err
	}
	settle(b)
	st, _ := b.QueueStats("backlog")
	full := measure()
	fmt.Printf("%-42s %s  (RSS %+.1f%%)\n", fmt.Sprintf("%d waiting (sent in %v):", st.Visible, time.Since(start).Round(time.Second)),
		full, 100*(full.rss-empty.rss)/empty.rss)
	if err := b.Close(); err != nil {
		return err
	}
	b, err = open(dir, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := b.Receive(context.Background(), "backlog", broker.ReceiveOptions{Max: 10}); err != nil {
		return err
	}
	reopened := measure()
	fmt.Printf("%-42s %s  (RSS %+.1f%%)\n", "reopened over the backlog, one receive:", reopened, 100*(reopened.rss-empty.rss)/empty.rss)
	return nil
}

// sendN sends n messages of backlogBody bytes, 100 per call from 16 senders.
func sendN(b *broker.Broker, n int) error {
	body := make([]byte, backlogBody)
	const perCall, senders = 100, 16
	var sent atomic.Int64
	var wg sync.WaitGroup
	var sendErr error
	var once sync.Once
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]broker.SendInput, perCall)
			for i := range in {
				in[i] = broker.SendInput{Body: body}
			}
			for sent.Add(perCall) <= int64(n) {
				if _, err := b.Send(context.Background(), "backlog", in); err != nil {
					once.Do(func() { sendErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return sendErr
}

// settle does what the server's maintenance tick does every second (among
// other things it drops cached messages nobody received), after a second.
func settle(b *broker.Broker) {
	time.Sleep(1100 * time.Millisecond)
	b.Maintain()
}

// memFigures are a process's resident set and the Go heap's live objects.
type memFigures struct{ rss, heap float64 }

func (m memFigures) String() string {
	return fmt.Sprintf("RSS %5.1f MiB, live heap %5.1f MiB", m.rss, m.heap)
}

func measure() memFigures {
	r := rss()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memFigures{rss: r, heap: float64(ms.HeapAlloc) / (1 << 20)}
}

// rss returns the process's resident set in MiB after a full GC.
func rss() float64 {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
