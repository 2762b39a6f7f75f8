package broker

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// One flipped byte anywhere in a queue's or a topic's settings costs
// nothing: the checksum catches it and the copy beside it is used. Both
// copies damaged costs that queue alone (unavailable, listed, deletable),
// never the broker's start.
func TestDamagedSettingsUseTheirCopy(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem)
	e.createQueue(QueueSettings{Name: "q", VisibilityTimeout: 42e9})
	e.createQueue(QueueSettings{Name: "other"})
	e.createTopic("t", 3)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	qs := findFiles(t, mem, "/data/queues", settingsFile)
	ts := findFiles(t, mem, "/data/topics", settingsFile)
	if len(qs) != 2 || len(ts) != 1 {
		t.Fatalf("settings files: queues %v, topics %v", qs, ts)
	}
	var qpath string
	for _, p := range qs {
		if filepath.Base(filepath.Dir(p)) != "" && filepath.Base(filepath.Dir(p))[2:] == "q" {
			qpath = p
		}
	}
	good, err := vfs.ReadFile(mem, qpath)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(path string, at int) {
		data, err := vfs.ReadFile(mem, path)
		if err != nil {
			t.Fatal(err)
		}
		data[at%len(data)] ^= 0x01
		if err := vfs.WriteFileAtomic(mem, filepath.Dir(path), filepath.Base(path), data); err != nil {
			t.Fatal(err)
		}
	}
	for at := 0; at < len(good); at += max(1, len(good)/30) {
		flip(qpath, at)
		flip(ts[0], at)
		e.open()
		s, err := e.b.GetQueue("q")
		if err != nil || s.VisibilityTimeout != 42e9 {
			t.Fatalf("flip at %d: queue %+v %v", at, s, err)
		}
		if n, err := e.b.PartitionCount("t"); err != nil || n != 3 {
			t.Fatalf("flip at %d: topic %d %v", at, n, err)
		}
		if err := e.b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(mem, filepath.Dir(qpath), settingsFile, good); err != nil {
			t.Fatal(err)
		}
	}
	flip(qpath, len(good)/2)
	flip(filepath.Join(filepath.Dir(qpath), backupName(settingsFile)), len(good)/2)
	e.open()
	if _, err := e.b.GetQueue("q"); !errors.Is(err, ErrQueueUnavailable) {
		t.Fatalf("both copies damaged: %v, want ErrQueueUnavailable", err)
	}
	if _, err := e.b.GetQueue("other"); err != nil {
		t.Fatalf("another queue: %v", err)
	}
	if err := e.b.DeleteQueue("q"); err != nil {
		t.Fatalf("delete the unavailable queue: %v", err)
	}
}

// A directory without settings is a create (or a delete) a crash
// interrupted: the next start removes it, and ids are never handed out
// twice.
func TestUnfinishedCreateIsRemoved(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem)
	e.createQueue(QueueSettings{Name: "q"})
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := vfs.MkdirAllDurable(mem, "/data/queues/77-ghost/log"); err != nil {
		t.Fatal(err)
	}
	e.open()
	if got := e.b.ListQueues(""); len(got) != 1 || got[0] != "q" {
		t.Fatalf("queues %v, want only q", got)
	}
	if _, err := mem.Stat("/data/queues/77-ghost"); err == nil {
		t.Fatal("the unfinished create's directory is still there")
	}
	s, err := e.b.CreateQueue(QueueSettings{Name: "next"})
	if err != nil || s.ID <= 77 {
		t.Fatalf("new queue id %d %v, want one past every id seen", s.ID, err)
	}
}

// A catalog.json of the first layout (no checksum, one file) is moved into
// the directories at Open and removed.
func TestLegacyCatalogIsMigrated(t *testing.T) {
	mem := vfs.NewMem()
	legacy := `{"version":1,"queues":{"old":{"name":"old","id":1,"visibility_timeout":30000000000,"retention":345600000000000,` +
		`"max_message_bytes":1048576,"max_extension":43200000000000,"dedup_window":300000000000}},` +
		`"topics":{"t":{"name":"t","id":2,"partitions":2,"retention":604800000000000,"max_message_bytes":1048588,"cleanup_policy":"delete"}},` +
		`"subscriptions":{"t/s":{"topic":"t","name":"s","id":3,"visibility_timeout":30000000000,"max_extension":43200000000000}},"next_id":4}`
	if err := vfs.MkdirAllDurable(mem, "/data"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(mem, "/data", legacyCatalogFile, []byte(legacy)); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, mem)
	if _, err := e.b.GetQueue("old"); err != nil {
		t.Fatalf("the first layout's queue: %v", err)
	}
	if n, err := e.b.PartitionCount("t"); err != nil || n != 2 {
		t.Fatalf("its topic: %d %v", n, err)
	}
	if _, err := e.b.GetSubscription("t", "s"); err != nil {
		t.Fatalf("its subscription: %v", err)
	}
	if _, err := mem.Stat("/data/" + legacyCatalogFile); err == nil {
		t.Fatal("catalog.json is still there")
	}
	if s, err := e.b.CreateQueue(QueueSettings{Name: "new"}); err != nil || s.ID != 4 {
		t.Fatalf("next id %d %v, want 4", s.ID, err)
	}
	e.restart()
	if got := e.b.ListQueues(""); len(got) != 2 {
		t.Fatalf("after a restart: %v", got)
	}
}

// FuzzReadSettings: no settings file, however damaged, panics the reader;
// one it accepts survives its own write and read.
func FuzzReadSettings(f *testing.F) {
	var buf []byte
	{
		mem := vfs.NewMem()
		_ = writeSettings(mem, "/", "s.json", QueueSettings{Name: "q", ID: 1})
		buf, _ = vfs.ReadFile(mem, "/s.json")
	}
	f.Add(buf)
	f.Add([]byte(`{"checksum": 0, "value": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		if err := vfs.WriteFileAtomic(mem, "/", "s.json", data); err != nil {
			t.Fatal(err)
		}
		var s QueueSettings
		found, err := readSettings(mem, "/", "s.json", &s)
		if !found {
			t.Fatalf("an existing file was not found: %v", err)
		}
		if err != nil {
			return
		}
		if err := writeSettings(mem, "/w", "s.json", s); err != nil {
			if err := vfs.MkdirAllDurable(mem, "/w"); err != nil {
				t.Fatal(err)
			}
			if err := writeSettings(mem, "/w", "s.json", s); err != nil {
				t.Fatal(err)
			}
		}
		var again QueueSettings
		if _, err := readSettings(mem, "/w", "s.json", &again); err != nil || !reflect.DeepEqual(again.clone(), s.clone()) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, s)
		}
	})
}
