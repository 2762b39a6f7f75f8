package meta

import (
	"errors"
	"reflect"
	"testing"
)

func TestQueueCommands(t *testing.T) {
	a := newApplier(t)
	a.nodes(3)
	topic := a.create("orders", 2, 3).Topic

	r := a.run(Command{Op: OpCreateQueue, Name: "jobs", Settings: []byte(`{"a":1}`)})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	q := r.Queue
	if len(q.Replicas) != 3 || q.Group != topic.Partitions[1].Group+1 || string(q.Settings) != `{"a":1}` {
		t.Fatalf("created %+v", q)
	}
	// Placement follows the partitions' rule: a one-partition topic of that name.
	if want := a.m.State().clone().place("jobs", 0, 1, 3)[0].Replicas; !reflect.DeepEqual(q.Replicas, want) {
		t.Fatalf("replicas %v, want %v", q.Replicas, want)
	}

	again := a.run(Command{Op: OpCreateQueue, Name: "jobs", Settings: []byte(`{"b":2}`)})
	if !errors.Is(again.Err, ErrQueueExists) || again.Queue != q {
		t.Fatalf("second create: %+v", again)
	}
	up := a.run(Command{Op: OpUpdateQueue, Name: "jobs", Settings: []byte(`{"b":2}`)})
	if up.Err != nil || string(up.Queue.Settings) != `{"b":2}` || up.Queue.Group != q.Group || up.Queue.Created != q.Created || up.Queue.Version <= q.Version {
		t.Fatalf("update: %+v", up)
	}
	if string(q.Settings) != `{"a":1}` {
		t.Fatal("update changed the queue handed out before it")
	}

	refusals := []struct {
		c    Command
		want error
	}{
		{Command{Op: OpCreateQueue, Name: "bad/name"}, ErrInvalidQueueName},
		{Command{Op: OpCreateQueue, Name: "big", RF: 4}, ErrReplicationFactor},
		{Command{Op: OpUpdateQueue, Name: "nope"}, ErrUnknownQueue},
		{Command{Op: OpDeleteQueue, Name: "nope"}, ErrUnknownQueue},
	}
	for _, tc := range refusals {
		if r := a.run(tc.c); !errors.Is(r.Err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.c, r.Err, tc.want)
		}
	}

	if r := a.run(Command{Op: OpDeleteQueue, Name: "jobs"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, ok := a.m.State().Queues["jobs"]; ok {
		t.Fatal("deleted queue still in the catalog")
	}
	re := a.run(Command{Op: OpCreateQueue, Name: "jobs", RF: 1})
	if re.Err != nil || re.Queue.Group <= q.Group || len(re.Queue.Replicas) != 1 {
		t.Fatalf("re-created: %+v (old group %d)", re, q.Group)
	}
	// A topic of the queue's name is another thing: both exist.
	if r := a.create("jobs", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// A version 1 snapshot (before queues) still restores.
func TestRestoreVersion1Snapshot(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands()[:12])
	s := m.State()
	if len(s.Queues) != 0 {
		t.Fatal("the first twelve seed commands make no queue")
	}
	v2 := s.encode()
	v1 := append([]byte{1}, v2[1:len(v2)-4]...) // drop the queue count and the membership section (four zeros)
	r := NewMachine(1)
	if err := r.Restore(v1); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.State(), s) {
		t.Fatalf("restored %+v, want %+v", r.State(), s)
	}
}

func TestValidQueueName(t *testing.T) {
	for name, want := range map[string]bool{"a": true, "jobs-1_x.fifo": true, "": false, "..": false,
		"a b": false, string(make([]byte, MaxQueueName+1)): false} {
		if got := ValidQueueName(name); got != want {
			t.Errorf("%q: %v", name, got)
		}
	}
}
