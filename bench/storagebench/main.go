// Command storagebench measures the partition log against the disk it runs
// on, in one run: first the disk's own limits (fdatasync rate, bandwidth of
// synced sequential writes), then append throughput of 1 KiB records in
// batches of 1, 16 and 256 from 1, 8 and 64 concurrent appenders under
// fsync=always, and the ratios between the two.
//
//	go run ./bench/storagebench -dir /var/tmp -duration 3s
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/diskprobe"
	"github.com/sluice-mq/sluice/internal/storage"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure (a temporary folder is made inside)")
	dur := flag.Duration("duration", 2*time.Second, "how long each measurement runs")
	flag.Parse()
	if err := run(*dir, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "storagebench:", err)
		os.Exit(1)
	}
}

func run(parent string, dur time.Duration) error {
	dir, err := os.MkdirTemp(parent, "storagebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	limits, err := diskprobe.Measure(dir, dur)
	if err != nil {
		return err
	}
	fmt.Printf("disk: %s\n\n", limits)

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "batch\tappenders\tappends/s\trecords/s\tMB/s\tappends/fdatasync rate\tMB/s / disk MB/s\t")
	for _, records := range []int{1, 16, 256} {
		for _, appenders := range []int{1, 8, 64} {
			appends, bytes, err := measure(dir, records, appenders, dur)
			if err != nil {
				return err
			}
			sec := dur.Seconds()
			mbps := float64(bytes) / sec / 1e6
			fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.0f\t%.1f\t%.1fx\t%.0f%%\t\n", records, appenders,
				float64(appends)/sec, float64(appends*int64(records))/sec, mbps,
				float64(appends)/sec/limits.FdatasyncPerSec, 100*mbps*1e6/limits.SyncedBytesPerS)
		}
	}
	return tw.Flush()
}

// measure appends batches of records 1 KiB records from appenders goroutines
// for dur and returns the appends and bytes acknowledged.
func measure(parent string, records, appenders int, dur time.Duration) (int64, int64, error) {
	dir, err := os.MkdirTemp(parent, "log-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	l, err := storage.Open(storage.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	recs := make([]batch.Record, records)
	for i := range recs {
		recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Value: make([]byte, 1024)}
	}
	payload, err := batch.Build(recs, batch.Options{})
	if err != nil {
		return 0, 0, err
	}
	var appends atomic.Int64
	var firstErr error
	var once sync.Once
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if _, err := l.Append(context.Background(), payload); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				appends.Add(1)
			}
		}()
	}
	wg.Wait()
	n := appends.Load()
	return n, n * int64(len(payload)), firstErr
}
