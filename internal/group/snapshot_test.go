package group

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCaptureSnapshotIsTheStateAtCapture: a snapshot captured, then built only after the
// coordinator went on changing (commits, deletions of offsets and of groups, new groups),
// rebuilds exactly the committed offsets of the moment of its capture, as kept by a model
// (group → partition → offset, metadata and time) — and is the same events as a snapshot
// built at once. Seeded random schedules, several captures alive at a time.
func TestCaptureSnapshotIsTheStateAtCapture(t *testing.T) {
	type key struct {
		group string
		tp    topicPartition
	}
	type pending struct {
		build func() []Event
		model map[key]Committed
		eager []byte
		step  int
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		c := New(Config{})
		model := map[key]Committed{}
		var live []pending
		build := func(p pending) {
			t.Helper()
			evs := p.build()
			if got := encodeAll(t, evs); string(got) != string(p.eager) {
				t.Fatalf("seed %d: captured at step %d: built later, the events differ from a snapshot built at once", seed, p.step)
			}
			got := map[key]Committed{}
			fresh := replayed(t, evs)
			for id := range fresh.groups {
				for _, o := range fresh.Offsets(id) {
					got[key{id, topicPartition{o.Topic, o.Partition}}] = o.Committed
				}
			}
			if len(got) != len(p.model) {
				t.Fatalf("seed %d: captured at step %d: %d offsets rebuilt, %d committed then", seed, p.step, len(got), len(p.model))
			}
			for k, want := range p.model {
				if o, ok := got[k]; !ok || o.Offset != want.Offset || o.Metadata != want.Metadata || !o.CommitTime.Equal(want.CommitTime) {
					t.Fatalf("seed %d: captured at step %d: %v is %+v (present %v), was %+v", seed, p.step, k, o, ok, want)
				}
			}
		}
		for step := range 400 {
			group := fmt.Sprintf("g%d", rng.IntN(6))
			at := epoch.Add(time.Duration(step/3) * time.Second) // several commits share a time
			switch r := rng.IntN(20); {
			case r < 12:
				ev := Event{Type: EventOffsetsCommitted, Group: group, Time: at}
				for range 1 + rng.IntN(4) {
					tp := topicPartition{fmt.Sprintf("t%d", rng.IntN(3)), int32(rng.IntN(4))}
					o := Committed{Offset: int64(rng.IntN(1000)), Metadata: fmt.Sprint(step), CommitTime: at}
					ev.Offsets = append(ev.Offsets, CommittedOffset{Topic: tp.topic, Partition: tp.partition, Committed: o})
				}
				apply(t, c, ev)
				for _, o := range ev.Offsets {
					model[key{group, topicPartition{o.Topic, o.Partition}}] = o.Committed
				}
			case r < 15:
				tp := topicPartition{fmt.Sprintf("t%d", rng.IntN(3)), int32(rng.IntN(4))}
				apply(t, c, Event{Type: EventOffsetsDeleted, Group: group, Time: at,
					Offsets: []CommittedOffset{{Topic: tp.topic, Partition: tp.partition}}})
				delete(model, key{group, tp})
			case r < 16:
				apply(t, c, Event{Type: EventGroupDeleted, Group: group})
				for k := range model {
					if k.group == group {
						delete(model, k)
					}
				}
			case r < 18:
				frozen := map[key]Committed{}
				for k, v := range model {
					frozen[k] = v
				}
				live = append(live, pending{build: c.CaptureSnapshot(), model: frozen, eager: encodeAll(t, c.Snapshot()), step: step})
			default:
				if len(live) > 0 {
					i := rng.IntN(len(live))
					build(live[i])
					live = append(live[:i], live[i+1:]...)
				}
			}
		}
		for _, p := range live {
			build(p)
		}
	}
}

func apply(t *testing.T, c *Coordinator, ev Event) {
	t.Helper()
	if err := c.Apply(ev); err != nil {
		t.Fatal(err)
	}
}

func encodeAll(t *testing.T, evs []Event) []byte {
	t.Helper()
	var out []byte
	for _, ev := range evs {
		raw, err := ev.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw...)
	}
	return out
}
