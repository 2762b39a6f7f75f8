package replqueue

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// BenchmarkBacklogSnapshot: what a backlog costs a replica, since every unfinished body is
// held in memory and every snapshot encodes all of them (docs/cluster.md, "Queues in a
// cluster"). The machine holds 100,000 messages of 1 KiB; reported: heap per message and
// the time and size of one Snapshot.
//
//	go test -run '^$' -bench BacklogSnapshot -benchtime 5x ./internal/cluster/replqueue/
func BenchmarkBacklogSnapshot(b *testing.B) {
	const n, size = 100_000, 1024
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := NewMachine(1, queue.Config{})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, size)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ents := make([]multiraft.Entry, 0, 1000)
	for i := range n {
		c := Command{Op: OpSend, Origin: 2, Request: uint64(i + 1), Now: now, Body: body}
		ents = append(ents, multiraft.Entry{Index: uint64(i + 1), Term: 1, Data: c.Encode(nil)})
		if len(ents) == cap(ents) {
			if err := m.Apply(ents); err != nil {
				b.Fatal(err)
			}
			ents = ents[:0]
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ResetTimer() // (it also drops metrics reported before it)
	var snap []byte
	for range b.N {
		if snap, err = m.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(snap))/(1<<20), "snapshot-MiB")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/msg")
}

// BenchmarkBacklogChurn: what snapshots cost a queue with a backlog: taken every
// SnapshotEntries and encoded in the Ready loop (as before), paced by the backlog
// (SnapshotDue), and paced and encoded off the Ready loop (CaptureSnapshot). One host (a
// single-node group, MemEngine, the default SnapshotEntries of 10,000) takes 100,000 sends
// of 1 KiB that nobody receives, then 30,000 more; reported: the snapshot bytes written per
// byte of entries applied, the snapshots taken, the Ready loop's longest and total hold in
// them (Snapshot, or CaptureSnapshot: the encoding runs beside it), and the whole run.
//
//	go test -run '^$' -bench BacklogChurn -benchtime 1x ./internal/cluster/replqueue/
func BenchmarkBacklogChurn(b *testing.B) {
	for _, mode := range []string{"every-10000-entries", "paced", "paced-off-the-loop"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				backlogChurn(b, mode)
			}
		})
	}
}

func backlogChurn(b *testing.B, mode string) {
	const backlog, churn = 100_000, 30_000
	m, err := NewMachine(1, queue.Config{})
	if err != nil {
		b.Fatal(err)
	}
	timed := &timedSnapshots{m: m}
	var sm multiraft.StateMachine = timed
	switch mode {
	case "paced":
		sm = pacedTimed{timed}
	case "paced-off-the-loop":
		sm = capturingTimed{pacedTimed{timed}}
	}
	h, err := multiraft.New(multiraft.Config{Node: 1, Peers: []multiraft.NodeID{1}, Engine: multiraft.NewMemEngine(),
		Transport: nopTransport{}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	if err := h.CreateGroup(testGroup, []multiraft.NodeID{1}, sm); err != nil {
		b.Fatal(err)
	}
	_ = h.Campaign(testGroup)
	for range 100 {
		if _, err := h.ProcessReady(); err != nil {
			b.Fatal(err)
		}
		h.Tick()
		if st, _ := h.Status(testGroup); st.Leader == 1 {
			break
		}
	}
	body := make([]byte, 1024)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var entryBytes int64
	start := time.Now()
	for i := range backlog + churn {
		c := Command{Op: OpSend, Origin: 2, Request: uint64(i + 1), Now: now, Body: body}
		data := c.Encode(nil)
		entryBytes += int64(len(data))
		if _, err := h.ProposeAsync(testGroup, data); err != nil {
			b.Fatal(err)
		}
		if i%100 == 99 {
			if _, err := h.ProcessReady(); err != nil {
				b.Fatal(err)
			}
		}
	}
	for h.BackgroundWork() > 0 {
		time.Sleep(time.Millisecond)
	}
	for range 10 {
		if _, err := h.ProcessReady(); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	st := h.Stats()
	b.ReportMetric(float64(st.SnapBytesCreated)/float64(entryBytes), "snap-B/entry-B")
	b.ReportMetric(float64(st.SnapsCreated), "snapshots")
	b.ReportMetric(timed.longest.Seconds()*1000, "longest-hold-ms")
	b.ReportMetric(timed.total.Seconds()*1000, "hold-ms")
	b.ReportMetric(elapsed.Seconds(), "run-s")
}

// timedSnapshots is a Machine without SnapshotDue nor CaptureSnapshot (the host takes its
// snapshots every SnapshotEntries, in the Ready loop), timing them.
type timedSnapshots struct {
	m              *Machine
	longest, total time.Duration
}

func (t *timedSnapshots) Apply(ents []multiraft.Entry) error { return t.m.Apply(ents) }
func (t *timedSnapshots) Restore(b []byte) error             { return t.m.Restore(b) }
func (t *timedSnapshots) Snapshot() ([]byte, error) {
	defer t.hold(time.Now())
	return t.m.Snapshot()
}

func (t *timedSnapshots) hold(since time.Time) {
	d := time.Since(since)
	t.longest, t.total = max(t.longest, d), t.total+d
}

// pacedTimed adds the machine's SnapshotDue.
type pacedTimed struct{ *timedSnapshots }

func (p pacedTimed) SnapshotDue() bool { return p.m.SnapshotDue() }

// capturingTimed adds its CaptureSnapshot, timing the capture (the Ready loop's part).
type capturingTimed struct{ pacedTimed }

func (c capturingTimed) CaptureSnapshot() (func() ([]byte, error), error) {
	defer c.hold(time.Now())
	return c.m.CaptureSnapshot()
}

type nopTransport struct{}

func (nopTransport) Send(multiraft.Batch) {}
