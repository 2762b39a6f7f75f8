// Command manyqueues measures what many queues and partitions cost a
// broker: it creates Q queues and a topic of P partitions, sends a message
// to each queue and produces a record to each partition, closes the broker,
// opens it again (a start over all of them), receives from every queue and
// fetches from every partition, and reports each phase's time, the resident
// memory with everything open, and the most file descriptors held. Run it
// under a lowered descriptor limit to see the broker keep within it:
//
//	(ulimit -n 4096; go run ./bench/manyqueues -queues 100000 -partitions 10000 -dir /var/tmp)
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
)

func main() {
	queues := flag.Int("queues", 100_000, "queues to create")
	partitions := flag.Int("partitions", 10_000, "partitions of the one topic (at most the broker's limit per topic)")
	parent := flag.String("dir", os.TempDir(), "directory on the disk to use (a temporary folder is made inside)")
	workers := flag.Int("workers", 16, "queues created, sent to and received from at once")
	keep := flag.Bool("keep", false, "keep the data directory")
	flag.StringVar(&memProfile, "memprofile", "", "write a heap profile to this file once everything is open again")
	flag.Parse()
	if err := run(*queues, *partitions, *parent, *workers, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "manyqueues:", err)
		os.Exit(1)
	}
}

var memProfile string

func run(nq, np int, parent string, workers int, keep bool) error {
	dir, err := os.MkdirTemp(parent, "manyqueues-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	fmt.Printf("%d queues, a topic of %d partitions, in %s; RLIMIT_NOFILE %d\n", nq, np, dir, lim.Cur)
	open := func() (*broker.Broker, error) {
		return broker.Open(broker.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	peak := &fdPeak{}
	stop := peak.watch()
	defer stop()

	b, err := open()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := phase("create and send to each queue", nq, workers, func(i int) error {
		name := "q" + strconv.Itoa(i)
		if _, err := b.CreateQueue(broker.QueueSettings{Name: name}); err != nil {
			return err
		}
		_, err := b.Send(ctx, name, []broker.SendInput{{Body: []byte("hello")}})
		return err
	}); err != nil {
		return err
	}
	if np > 0 {
		start := time.Now()
		if _, err := b.CreateTopic(broker.TopicSettings{Name: "t", Partitions: int32(np)}); err != nil {
			return err
		}
		fmt.Printf("%-42s %10s\n", "create the topic", time.Since(start).Round(time.Millisecond))
		if err := phase("produce to each partition", np, workers, func(i int) error {
			p := int32(i)
			_, err := b.Produce(ctx, "t", []broker.ProduceRecord{{Value: []byte("hello"), Partition: &p}}, broker.ProduceOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := b.Close(); err != nil {
		return err
	}
	fmt.Printf("%-42s %10s\n", "close", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	if b, err = open(); err != nil {
		return err
	}
	fmt.Printf("%-42s %10s   RSS %s\n", "open again (the start)", time.Since(start).Round(time.Millisecond), rss())
	if memProfile != "" {
		f, err := os.Create(memProfile)
		if err != nil {
			return err
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			return err
		}
		f.Close()
	}
	var got atomic.Int64
	if err := phase("receive from each queue", nq, workers, func(i int) error {
		ds, err := b.Receive(ctx, "q"+strconv.Itoa(i), broker.ReceiveOptions{Max: 1})
		got.Add(int64(len(ds)))
		return err
	}); err != nil {
		return err
	}
	if np > 0 {
		if err := phase("fetch from each partition", np, workers, func(i int) error {
			r, err := b.Fetch(ctx, "t", int32(i), 0, broker.FetchOptions{MaxBytes: 1 << 10})
			if err == nil && len(r.Batches) > 0 {
				got.Add(1)
			}
			return err
		}); err != nil {
			return err
		}
	}
	fmt.Printf("%-42s %10s   RSS %s\n", "everything open and read once", "", rss())
	start = time.Now()
	if err := b.Close(); err != nil {
		return err
	}
	fmt.Printf("%-42s %10s\n", "close", time.Since(start).Round(time.Millisecond))
	stop()
	fmt.Printf("read back %d of %d; at most %d file descriptors open at once\n", got.Load(), nq+np, peak.max.Load())
	return nil
}

// phase runs fn for 0..n-1 on workers goroutines and prints its time.
func phase(name string, n, workers int, fn func(i int) error) error {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || firstErr.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("%s, #%d: %w", name, i, err))
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Printf("%-42s %10s   (%.0f/s)\n", name, d.Round(time.Millisecond), float64(n)/d.Seconds())
	return nil
}

// fdPeak samples the process's open descriptors.
type fdPeak struct{ max atomic.Int64 }

func (p *fdPeak) watch() (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if ents, err := os.ReadDir("/proc/self/fd"); err == nil && int64(len(ents)) > p.max.Load() {
				p.max.Store(int64(len(ents)))
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

// rss is the resident memory once the garbage of what came before is
// collected and given back to the OS (so it reads what is live, not what
// a start allocated on the way), with the live Go heap beside it.
func rss() string {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return residentKiB() + fmt.Sprintf(", live heap %d MiB, goroutines %d", ms.HeapAlloc>>20, runtime.NumGoroutine())
}

func residentKiB() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
