package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkQueueSendFanIn is the shape of a queue behind the SQS front door
// (W2 over SQS): many senders with one 1 KiB message each in flight
// (SendMessage per message), and 4 consumers that receive up to 10 and
// delete them in one batch, on the real disk with fsync always. One op is
// one message acked.
func BenchmarkQueueSendFanIn(b *testing.B) {
	for _, senders := range []int{16, 256} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			br, err := Open(Options{Dir: b.TempDir(), FS: vfs.Default, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			fanIn(b, br, senders, 4, 10)
		})
	}
}

func fanIn(b *testing.B, br *Broker, senders, consumers, max int) {
	if _, err := br.CreateQueue(QueueSettings{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	in := []SendInput{{Body: make([]byte, 1024)}}
	b.SetBytes(1024)
	var left, acked atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for range senders {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := br.Send(ctx, "bench", in); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	for range consumers {
		wg.Go(func() {
			for acked.Load() < int64(b.N) {
				ds, err := br.Receive(ctx, "bench", ReceiveOptions{Max: max, Wait: 20 * time.Millisecond})
				if err != nil {
					b.Error(err)
					return
				}
				if len(ds) == 0 {
					continue
				}
				receipts := make([]string, len(ds))
				for i, d := range ds {
					receipts[i] = d.Receipt
				}
				if _, err := br.AckBatch(ctx, "bench", receipts); err != nil {
					b.Error(err)
					return
				}
				acked.Add(int64(len(ds)))
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(acked.Load())/b.Elapsed().Seconds(), "msgs/s")
}
