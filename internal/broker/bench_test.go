package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkQueueRoundTrip is send + receive + ack of 1 KiB messages on the
// real disk (fsync always), with as many producers as consumers. One op is
// one message acked. bench/queuebench prints the same beside the disk's
// fdatasync rate.
func BenchmarkQueueRoundTrip(b *testing.B) {
	for _, consumers := range []int{1, 4, 16} {
		for _, size := range []int{1, 10} {
			b.Run(fmt.Sprintf("consumers=%d/batch=%d", consumers, size), func(b *testing.B) {
				benchRoundTrip(b, consumers, size)
			})
		}
	}
}

// BenchmarkQueueRoundTripCPU is BenchmarkQueueRoundTrip in memory without
// fsync and with 128-byte bodies: the broker's own CPU per message (cursor,
// receipts, journal encoding), which the disk's fsyncs hide in the other.
// Run it with a count (-benchtime 200000x): MemFS keeps what it is sent.
func BenchmarkQueueRoundTripCPU(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		b.Run(fmt.Sprintf("consumers=%d/batch=10", consumers), func(b *testing.B) {
			br, err := Open(Options{Dir: "/data", FS: vfs.NewMem(), Logger: quietLogger(),
				Sync: storage.SyncPolicy{Mode: storage.SyncNever}, HeadroomBytes: -1, PreallocateBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			roundTrip(b, br, consumers, 10, 128)
		})
	}
}

func benchRoundTrip(b *testing.B, consumers, size int) {
	br, err := Open(Options{Dir: b.TempDir(), FS: vfs.Default, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	roundTrip(b, br, consumers, size, 1024)
}

// roundTrip sends b.N bodies of bodySize bytes to a new queue of br from
// as many producers as consumers, each consumer receiving and acking
// batches of size, and closes br.
func roundTrip(b *testing.B, br *Broker, consumers, size, bodySize int) {
	defer br.Close()
	if _, err := br.CreateQueue(QueueSettings{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	body := make([]byte, bodySize)
	b.SetBytes(int64(len(body)))
	perProducer := (b.N + consumers*size - 1) / (consumers * size)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards acked
	acked := 0
	b.ResetTimer()
	for range consumers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			in := make([]SendInput, size)
			for i := range in {
				in[i] = SendInput{Body: body}
			}
			for range perProducer {
				if _, err := br.Send(ctx, "bench", in); err != nil {
					b.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := acked >= perProducer*consumers*size
				mu.Unlock()
				if done {
					return
				}
				ds, err := br.Receive(ctx, "bench", ReceiveOptions{Max: size, Wait: 20 * time.Millisecond})
				if err != nil {
					b.Error(err)
					return
				}
				receipts := make([]string, len(ds))
				for i, d := range ds {
					receipts[i] = d.Receipt
				}
				if len(receipts) > 0 {
					if _, err := br.AckBatch(ctx, "bench", receipts); err != nil {
						b.Error(err)
						return
					}
				}
				mu.Lock()
				acked += len(ds)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(acked)/b.Elapsed().Seconds(), "msgs/s")
}
