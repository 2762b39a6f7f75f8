package broker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// One flipped byte anywhere in the catalog costs nothing: the checksum
// catches it and the second copy is used (and written back). Both copies
// damaged is a clear refusal to start, never a guess.
func TestDamagedCatalogUsesItsCopy(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem)
	e.createQueue(QueueSettings{Name: "q", VisibilityTimeout: 42e9})
	e.createTopic("t", 3)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := vfs.ReadFile(mem, "/data/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	for at := 0; at < len(good); at += max(1, len(good)/40) {
		bad := append([]byte(nil), good...)
		bad[at] ^= 0x01
		if err := vfs.WriteFileAtomic(mem, "/data", "catalog.json", bad); err != nil {
			t.Fatal(err)
		}
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
	}
	for _, name := range []string{"catalog.json", "catalog.bak.json"} {
		bad := append([]byte(nil), good...)
		bad[len(bad)/2] ^= 0x01
		if err := vfs.WriteFileAtomic(mem, "/data", name, bad); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(Options{Dir: "/data", FS: mem, Logger: quietLogger(), HeadroomBytes: testHeadroom}); err == nil ||
		!strings.Contains(err.Error(), "restore the data directory") {
		t.Fatalf("both copies damaged: %v, want a refusal that says what to do", err)
	}
	e.b = nil // nothing to close
}

// A catalog in the first format (no checksum, one copy) is read as it is.
func TestCatalogFirstFormatIsRead(t *testing.T) {
	mem := vfs.NewMem()
	legacy := `{"version":1,"queues":{"old":{"name":"old","id":1,"visibility_timeout":30000000000,"retention":345600000000000,` +
		`"max_message_bytes":1048576,"max_extension":43200000000000,"dedup_window":300000000000}},"topics":{},"next_id":2}`
	if err := vfs.MkdirAllDurable(mem, "/data"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(mem, "/data", "catalog.json", []byte(legacy)); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, mem)
	if _, err := e.b.GetQueue("old"); err != nil {
		t.Fatalf("a first-format catalog's queue: %v", err)
	}
}

// normalizeCatalog makes nil and empty maps compare equal (clone makes
// every map).
func normalizeCatalog(d catalogData) catalogData { return d.clone() }

// FuzzReadCatalog: no catalog file, however damaged, panics the reader;
// one it accepts is one it wrote, or a first-format one.
func FuzzReadCatalog(f *testing.F) {
	f.Add([]byte(`{"checksum": 0, "catalog": {}}`))
	f.Add([]byte(`{"version":1,"queues":{},"topics":{},"next_id":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		if err := vfs.WriteFileAtomic(mem, "/", "c.json", data); err != nil {
			t.Fatal(err)
		}
		d, found, err := readCatalog(mem, "/c.json")
		if !found {
			t.Fatalf("an existing file was not found: %v", err)
		}
		if err != nil {
			return
		}
		// What was accepted survives the catalog's own write and read.
		c := &catalog{fs: mem, dir: "/w"}
		if err := vfs.MkdirAllDurable(mem, "/w"); err != nil {
			t.Fatal(err)
		}
		if err := c.write(d); err != nil {
			t.Fatal(err)
		}
		again, _, err := readCatalog(mem, "/w/"+catalogFile)
		if err != nil || !reflect.DeepEqual(normalizeCatalog(again), normalizeCatalog(d)) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, again, d)
		}
	})
}
