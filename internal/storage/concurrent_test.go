package storage

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestConcurrentUse runs appenders, readers of every kind, long-pollers and
// retention at once on the real file system (run with -race). Readers may
// see ErrOffsetOutOfRange for offsets retention deleted, nothing else.
func TestConcurrentUse(t *testing.T) {
	o := testOptions(t, vfs.Default, t.TempDir())
	o.SegmentBytes, o.IndexIntervalBytes = 8<<10, 512
	l := mustOpen(t, o)
	defer l.Close()
	const appenders, perAppender = 4, 80
	ctx := context.Background()
	var writers, readers sync.WaitGroup
	errs := make(chan error, 64)
	for range appenders {
		writers.Add(1)
		go func() {
			defer writers.Done()
			b := mkBatch(t, 3, 100, 1)
			for range perAppender {
				if _, err := l.Append(ctx, b); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	rctx, cancel := context.WithCancel(ctx)
	ok := func(err error) bool { return err == nil || errors.Is(err, ErrOffsetOutOfRange) }
	for r := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for off := int64(0); ; {
				select {
				case <-done:
					return
				default:
				}
				if err := l.Wait(rctx, off); err != nil {
					if !errors.Is(err, context.Canceled) {
						errs <- err
					}
					return
				}
				off = max(off, l.LogStartOffset())
				var err error
				switch r {
				case 0:
					var b []byte
					if b, err = l.Read(off, 4096); err == nil && len(b) > 0 {
						if verr := batch.Validate(b[:mustFrame(b)], 0); verr != nil {
							err = verr
						}
					}
				case 1:
					var s Section
					if s, err = l.ReadSection(off, 4096); err == nil {
						if _, werr := s.WriteTo(io.Discard); werr != nil && !l.segGone(off) {
							err = werr
						}
					}
				case 2:
					_, err = l.OffsetForTime(1)
				}
				if !ok(err) {
					errs <- err
					return
				}
				off++
			}
		}()
	}
	readers.Add(1)
	go func() { // retention, after every advance of the high watermark
		defer readers.Done()
		for hw := int64(0); ; hw = l.HighWatermark() {
			if err := l.Wait(rctx, hw); err != nil {
				return
			}
			if _, err := l.DeleteBelow(l.HighWatermark() - 200); err != nil {
				errs <- err
				return
			}
		}
	}()
	writers.Wait()
	close(done)
	cancel() // readers parked in Wait past the end
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l.Size() == 0 {
		t.Fatal("Size is 0")
	}
	if hw := l.HighWatermark(); hw != appenders*perAppender*3 {
		t.Fatalf("hw %d", hw)
	}
	checkAllReadable(t, l)
	if q := l.Quarantined(); len(q) != 0 {
		t.Fatalf("good batches quarantined: %+v", q)
	}
}

func mustFrame(b []byte) int64 {
	n, _ := batch.FrameSize(b)
	return n
}

// segGone reports whether offset is below the log start now (its segment was
// deleted while a section of it was being sent).
func (l *Log) segGone(offset int64) bool { return offset < l.LogStartOffset() }

// TestSyncerStopsWhenIdle: the group-commit syncer of an idle log exits,
// and appends racing with its exit are still made durable: a lost kick
// would leave an Append waiting for ever.
func TestSyncerStopsWhenIdle(t *testing.T) {
	old := syncerIdle
	syncerIdle = time.Millisecond
	defer func() { syncerIdle = old }()
	l := mustOpen(t, testOptions(t, vfs.NewMem(), "/p"))
	defer l.Close()
	if l.syncing.Load() {
		t.Fatal("a syncer runs before any append")
	}
	mustAppend(t, l, mkBatch(t, 1, 10, 1))
	waitFor(t, func() bool { return !l.syncing.Load() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 150 {
				time.Sleep(time.Duration((w*31+i*17)%1500) * time.Microsecond) // around the idle exit
				if _, err := l.Append(ctx, mkBatch(t, 1, 10, 1)); err != nil {
					t.Errorf("append %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if hw := l.HighWatermark(); hw != 601 {
		t.Fatalf("hw %d, want 601", hw)
	}
}
