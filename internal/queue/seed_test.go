package queue

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSeedWorkQueue replays the seed's step-3 work-queue example (000_448e0e282b9fd7ea.txt) on
// a fake clock: visibility 30 s, max receives 3; m1's consumer crashes holding it, m2 is a
// corrupt payload that is never acked, m3 succeeds. The trace must be the seed's, line for line.
func TestSeedWorkQueue(t *testing.T) {
	want := []string{
		"t=0s m1 received, consumer crashes",
		"t=0s m2 fails, attempt 1",
		"t=0s m3 done, acked true",
		"t=30s m1 done, acked true",
		"t=30s m2 fails, attempt 2",
		"t=60s m2 fails, attempt 3",
		"dead letters: [m2]",
	}
	for _, replay := range []bool{false, true} {
		t.Run(fmt.Sprintf("replay=%v", replay), func(t *testing.T) {
			got := runSeed(t, replay)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// runSeed runs the seed's main loop. With replay, the cursor is rebuilt from its journal before
// every receive, as if the broker restarted each second: the trace must not change.
func runSeed(t *testing.T, replay bool) []string {
	cfg := Config{Visibility: 30 * time.Second, MaxReceives: 3}
	c := mustNew(t, cfg)
	log := &testLog{}
	bodies := map[int64]string{}
	names := map[int64]string{}
	for i, body := range []string{"charge order 101", "corrupt payload", "charge order 103"} {
		off := log.send(t0, "", 0)
		bodies[off], names[off] = body, fmt.Sprintf("m%d", i+1)
	}
	var journal []Event
	var trace, dead []string
	sec, crashed := 0, false
	for step := 0; step < 1000 && !(c.Floor() == log.end && c.Stats(at(sec)).Held == 0); step++ {
		now := at(sec)
		if replay {
			c = rebuild(t, cfg, journal)
		}
		journal = append(journal, fill(c, log, now)...)
		ds, evs, err := c.Receive(now, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		journal = append(journal, evs...)
		for _, ev := range evs {
			if dl, ok := ev.(DeadLettered); ok {
				dead = append(dead, names[dl.Offset])
			}
		}
		if len(ds) == 0 {
			sec++ // everything left is in flight: wait for a timeout to run out
			continue
		}
		d := ds[0]
		name := names[d.Offset]
		switch {
		case name == "m1" && !crashed:
			crashed = true // the consumer dies holding m1, before its ack
			trace = append(trace, fmt.Sprintf("t=%ds %s received, consumer crashes", sec, name))
		case bodies[d.Offset] == "corrupt payload":
			trace = append(trace, fmt.Sprintf("t=%ds %s fails, attempt %d", sec, name, d.ReceiveCount))
		default:
			evs, err := c.Ack(now, d.Receipt)
			journal = append(journal, evs...)
			trace = append(trace, fmt.Sprintf("t=%ds %s done, acked %t", sec, name, err == nil))
		}
	}
	return append(trace, fmt.Sprintf("dead letters: %v", dead))
}

// rebuild replays a journal into a fresh cursor, going through the binary encoding.
func rebuild(t testing.TB, cfg Config, journal []Event) *Cursor {
	t.Helper()
	c := mustNew(t, cfg)
	for _, ev := range journal {
		b, err := ev.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		dec, err := UnmarshalEvent(b)
		if err != nil {
			t.Fatalf("decode %#v: %v", ev, err)
		}
		if err := c.Apply(dec); err != nil {
			t.Fatalf("apply %#v: %v", dec, err)
		}
	}
	return c
}
