package replqueue

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// applyAll applies commands as consecutive entries from the machine's next index.
func applyAll(tb testing.TB, m *Machine, cs ...Command) {
	tb.Helper()
	for _, c := range cs {
		idx := m.Stats().Applied + 1
		if err := m.Apply([]multiraft.Entry{{Index: idx, Term: 1, Data: c.Encode(nil)}}); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestNewMachineRefusesDeadLetter(t *testing.T) {
	if _, err := NewMachine(1, queue.Config{MaxReceives: 3}); !errors.Is(err, ErrDeadLetterUnsupported) {
		t.Fatalf("got %v", err)
	}
}

func TestApplyRefusesMalformed(t *testing.T) {
	m, _ := NewMachine(1, queue.Config{})
	for _, b := range [][]byte{nil, {99}, append((&Command{Op: OpAck}).Encode(nil), 0)} {
		if err := m.Apply([]multiraft.Entry{{Index: 1, Data: b}}); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%x: got %v, want ErrBadCommand", b, err)
		}
	}
}

// TestDeterministicWithSnapshots: two machines fed the same random commands (one of them
// restored from the other's snapshot now and then, as a lagging follower is) give the
// same results and the same snapshots: apply depends on the entries alone.
func TestDeterministicWithSnapshots(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			cfg := queue.Config{Visibility: 5 * time.Second, Lookahead: 4, Retention: time.Hour}
			a, _ := NewMachine(1, cfg)
			b, _ := NewMachine(1, cfg)
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			var receipts []string
			for i := range 400 {
				// the clock jitters backwards too: apply clamps it
				now = now.Add(time.Duration(rng.Intn(3000)-500) * time.Millisecond)
				c := Command{Origin: 1, Request: uint64(i + 1), Now: now}
				switch k := rng.Intn(10); {
				case k < 4:
					c.Op, c.Body, c.Delay = OpSend, []byte(fmt.Sprint("m", i)), time.Duration(rng.Intn(3))*time.Second
				case k < 6:
					c.Op, c.Max = OpReceive, 1+rng.Intn(3)
				case len(receipts) == 0:
					c.Op, c.Max = OpReceive, 1
				default:
					c.Op = []Op{OpAck, OpAck, OpNack, OpExtend}[rng.Intn(4)]
					c.Receipt = receipts[rng.Intn(len(receipts))]
					c.Timeout, c.Delay = time.Second, time.Second
				}
				idx := uint64(i + 1)
				e := []multiraft.Entry{{Index: idx, Term: 1, Data: c.Encode(nil)}}
				if err := a.Apply(e); err != nil {
					t.Fatal(err)
				}
				if rng.Intn(25) == 0 {
					snap, _ := a.Snapshot()
					if err := b.Restore(snap); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := b.Apply(e); err != nil {
					t.Fatal(err)
				}
				ra, _ := a.take(idx, c.Request)
				rb, _ := b.take(idx, c.Request)
				if fmt.Sprint(ra) != fmt.Sprint(rb) {
					t.Fatalf("entry %d: results differ:\n%+v\n%+v", idx, ra, rb)
				}
				for _, d := range ra.Deliveries {
					receipts = append(receipts, d.Receipt)
				}
				sa, _ := a.Snapshot()
				sb, _ := b.Snapshot()
				if !bytes.Equal(sa, sb) {
					t.Fatalf("entry %d: snapshots differ", idx)
				}
			}
		})
	}
}
