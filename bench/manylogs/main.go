// Command manylogs measures what many small partition logs cost a process:
// it opens N logs (each with one batch appended), closes them, opens them
// all again (the broker's start), reads a batch from each, and reports the
// time of each phase, the process's resident memory with every log open,
// and the most file descriptors it held, through one storage.FileCache.
// Run it under a lowered descriptor limit to see the cache keep the bound:
//
//	(ulimit -n 4096; go run ./bench/manylogs -n 100000 -dir /var/tmp)
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

func main() {
	n := flag.Int("n", 100_000, "logs to open")
	parent := flag.String("dir", os.TempDir(), "directory on the disk to use (a temporary folder is made inside)")
	workers := flag.Int("workers", 8, "logs opened, appended to and read at once")
	syncFlag := flag.String("fsync", "always", "sync policy of the logs (always, never, or an interval)")
	maxOpen := flag.Int("max-open", 0, "file cache capacity (0: storage's default for this process's RLIMIT_NOFILE)")
	keep := flag.Bool("keep", false, "keep the data directory")
	flag.Parse()
	pol, err := storage.ParseSyncPolicy(*syncFlag)
	if err != nil {
		fail(err)
	}
	if err := run(*n, *parent, *workers, pol, *maxOpen, *keep); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "manylogs:", err)
	os.Exit(1)
}

type bench struct {
	dir     string
	n       int
	workers int
	opts    storage.Options
	logs    []*storage.Log
	payload []byte
}

func run(n int, parent string, workers int, pol storage.SyncPolicy, maxOpen int, keep bool) error {
	dir, err := os.MkdirTemp(parent, "manylogs-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	files := storage.NewFileCache(storage.FileCacheOptions{MaxOpen: maxOpen})
	payload, err := batch.Build([]batch.Record{{Timestamp: time.Now().UnixMilli(), Value: make([]byte, 100)}}, batch.Options{})
	if err != nil {
		return err
	}
	b := &bench{dir: dir, n: n, workers: workers, logs: make([]*storage.Log, n), payload: payload,
		opts: storage.Options{Files: files, Sync: pol, Logger: slog.New(slog.DiscardHandler), SegmentBytes: 1 << 20}}
	fmt.Printf("%d logs, fsync=%s, RLIMIT_NOFILE %d, file cache %d, %d workers, %s\n\n",
		n, pol, rl.Cur, files.Stats().MaxOpen, workers, runtime.Version())
	fmt.Printf("%-28s %8s %9s %8s %9s %9s %10s %6s\n", "phase", "seconds", "logs/s", "RSS MiB", "heap MiB", "stack MiB", "goroutines", "fds")
	phase := func(name string, fn func(i int) error) error {
		start := time.Now()
		if err := b.each(fn); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d := time.Since(start)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("%-28s %8.2f %9.0f %8.0f %9.0f %9.0f %10d %6d\n", name, d.Seconds(), float64(n)/d.Seconds(), rssMiB(),
			float64(ms.HeapInuse)/(1<<20), float64(ms.StackInuse)/(1<<20), runtime.NumGoroutine(), openFDs())
		return nil
	}
	steps := []struct {
		name string
		fn   func(int) error
	}{
		{"create + append 1 batch", b.create},
		{"close", b.close},
		{"open again (start)", b.open},
		{"read 1 batch", b.read},
		{"close", b.close},
	}
	for _, s := range steps {
		if err := phase(s.name, s.fn); err != nil {
			return err
		}
	}
	st := files.Stats()
	fmt.Printf("\nfile cache: peak %d open (capacity %d), %d opens, %d evictions; peak RSS %.0f MiB\n",
		st.Peak, st.MaxOpen, st.Opens, st.Evictions, hwmMiB())
	return nil
}

// each runs fn for every log index on the workers.
func (b *bench) each(fn func(int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, b.workers)
	next := make(chan int)
	for range b.workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
loop:
	for i := range b.n {
		select {
		case next <- i:
		case err = <-errs:
			break loop
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func (b *bench) options(i int) storage.Options {
	o := b.opts
	o.Dir = filepath.Join(b.dir, strconv.Itoa(i/1000), strconv.Itoa(i))
	return o
}

func (b *bench) create(i int) error {
	if err := b.open(i); err != nil {
		return err
	}
	_, err := b.logs[i].Append(context.Background(), b.payload)
	return err
}

func (b *bench) open(i int) error {
	l, err := storage.Open(b.options(i))
	b.logs[i] = l
	return err
}

func (b *bench) read(i int) error {
	got, err := b.logs[i].Read(0, 1<<20)
	if err == nil && len(got) != len(b.payload) {
		err = fmt.Errorf("log %d: read %d bytes, appended %d", i, len(got), len(b.payload))
	}
	return err
}

func (b *bench) close(i int) error { return b.logs[i].Close() }

// rssMiB is the process's resident set now, from /proc/self/status.
func rssMiB() float64 { return procStatusMiB("VmRSS:") }

// hwmMiB is the most resident memory the process has had.
func hwmMiB() float64 { return procStatusMiB("VmHWM:") }

func procStatusMiB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

// openFDs counts the process's open descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
