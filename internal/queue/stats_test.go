package queue

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"
)

// Acks are counted by the cursor itself, so they survive a snapshot and a
// replay as receives do; a version-1 snapshot (before acks were counted)
// still restores, with acks from 0.
func TestAcksSurviveSnapshotAndReplay(t *testing.T) {
	c := mustNew(t, Config{})
	l := &testLog{}
	for range 3 {
		l.send(at(0), "", 0)
	}
	var journal []Event
	journal = append(journal, fill(c, l, at(1))...)
	ds, evs, err := c.Receive(at(1), 3, 0)
	if err != nil || len(ds) != 3 {
		t.Fatalf("receive %d %v", len(ds), err)
	}
	journal = append(journal, evs...)
	for _, d := range ds[:2] {
		evs, err := c.Ack(at(2), d.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		journal = append(journal, evs...)
	}
	if got := c.Stats(at(2)).Acks; got != 2 {
		t.Fatalf("acks %d, want 2", got)
	}
	restored, err := Restore(Config{}, c.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if got := restored.Stats(at(2)).Acks; got != 2 {
		t.Fatalf("after restore: acks %d, want 2", got)
	}
	replayed := mustNew(t, Config{})
	for _, ev := range journal {
		if err := replayed.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if got := replayed.Stats(at(2)).Acks; got != 2 {
		t.Fatalf("after replay: acks %d, want 2", got)
	}

	// A version-1 snapshot of an empty cursor: floor, token and five
	// counters (no acks), no runs, no messages.
	body := append([]byte{'S', 'Q', 'C', 1}, make([]byte, 7+2)...)
	v1 := binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	old, err := Restore(Config{}, v1)
	if err != nil {
		t.Fatalf("version-1 snapshot: %v", err)
	}
	if old.Stats(at(0)).Acks != 0 {
		t.Fatal("a version-1 snapshot restored acks it never had")
	}
}

// The age of the oldest message counts what a consumer could receive: a
// message waiting out its delay does not make a queue look late.
func TestOldestExcludesDelayed(t *testing.T) {
	c := mustNew(t, Config{})
	l := &testLog{}
	l.send(at(0), "", time.Hour) // delayed, oldest
	l.send(at(10), "", 0)
	fill(c, l, at(20))
	if got := c.Stats(at(20)).OldestSentAt; !got.Equal(at(10)) {
		t.Fatalf("oldest %v, want the undelayed message's %v", got, at(10))
	}
	if got := c.Stats(at(3600)).OldestSentAt; !got.Equal(at(0)) {
		t.Fatalf("once due: oldest %v, want %v", got, at(0))
	}
}
