package broker

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// format.json is written when absent and checked at every Open: a newer
// major is refused before anything is written, a newer minor of the same
// major opens and is left as recorded, a damaged file refuses rather than
// guessing.
func TestFormatFileCheckedAtOpen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		file     string // "" : no format.json
		wantErr  string // "" : opens
		tooNew   bool
		wantFile string // format.json after the open
	}{
		{name: "absent is written", wantFile: `{"major":1,"minor":1}`},
		{name: "current", file: `{"major":1,"minor":1}`, wantFile: `{"major":1,"minor":1}`},
		{name: "older minor is raised", file: `{"major":1,"minor":0}`, wantFile: `{"major":1,"minor":1}`},
		{name: "newer minor opens and is kept", file: `{"major":1,"minor":3}`, wantFile: `{"major":1,"minor":3}`},
		{name: "newer major refused", file: `{"major":2,"minor":0}`, tooNew: true,
			wantErr: "has on-disk format 2.0 and this binary reads 1.x", wantFile: `{"major":2,"minor":0}`},
		{name: "damaged refused", file: `{"major":`, wantErr: "format.json is damaged", wantFile: `{"major":`},
		{name: "major zero refused", file: `{"minor":1}`, wantErr: "format.json is damaged", wantFile: `{"minor":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			if err := vfs.MkdirAllDurable(fsys, "/data"); err != nil {
				t.Fatal(err)
			}
			if tc.file != "" {
				if err := vfs.WriteFileAtomic(fsys, "/data", formatFile, []byte(tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := Open(Options{Dir: "/data", FS: fsys, Logger: quietLogger(), HeadroomBytes: testHeadroom})
			if err == nil {
				b.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("open: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("open: %v, want an error containing %q", err, tc.wantErr)
			case errors.Is(err, ErrFormatTooNew) != tc.tooNew:
				t.Fatalf("open: %v; errors.Is(ErrFormatTooNew) = %v, want %v", err, !tc.tooNew, tc.tooNew)
			}
			got, rerr := vfs.ReadFile(fsys, "/data/"+formatFile)
			if rerr != nil || strings.TrimSpace(string(got)) != tc.wantFile {
				t.Fatalf("format.json after open: %q %v, want %q", got, rerr, tc.wantFile)
			}
			if tc.wantErr != "" {
				// A refused directory is left as it was found: no headroom
				// file, no catalog written by a binary that cannot read it.
				if names, _ := fsys.List("/data"); len(names) > 3 {
					t.Fatalf("refused directory was written to: %v", names)
				}
			}
		})
	}
}

// previousFormatDir is a data directory written by the code of on-disk
// format 1.0 before format.json existed (so without one): a queue with one
// message acked of three, a topic of two records and a subscription that
// acked the first. Made by TestWritePreviousFormatTestdata.
const previousFormatDir = "testdata/datadir-format-1.0"

// A data directory written by the previous format opens, with what it held:
// the upgrade promise of docs/operations.md, tested on committed bytes so a
// change to any file's layout that the code no longer reads fails here.
func TestPreviousFormatOpens(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(previousFormatDir)); err != nil {
		t.Fatal(err)
	}
	b, err := Open(Options{Dir: dir, Logger: quietLogger(), HeadroomBytes: -1, PreallocateBytes: -1,
		Now: func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatalf("open the previous format: %v", err)
	}
	defer b.Close()
	ctx := t.Context()
	ds, err := b.Receive(ctx, "jobs", ReceiveOptions{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, d := range ds {
		bodies = append(bodies, string(d.Body))
	}
	if strings.Join(bodies, ",") != "b,c" {
		t.Fatalf("queue jobs delivers %q, want b,c (a was acked before the upgrade)", bodies)
	}
	sd, err := b.SubscriptionReceive(ctx, "events", "audit", ReceiveOptions{Max: 10})
	if err != nil || len(sd) != 1 || string(sd[0].Value) != "second" || sd[0].Offset != 1 {
		t.Fatalf("subscription delivers %+v %v, want only offset 1 (second)", sd, err)
	}
	fr, err := b.Fetch(ctx, "events", 0, 0, FetchOptions{})
	if err != nil || fr.HighWatermark != 2 || len(fr.Batches) == 0 {
		t.Fatalf("fetch events/0: hw %d, %d bytes, %v; want both records", fr.HighWatermark, len(fr.Batches), err)
	}
	got, err := os.ReadFile(filepath.Join(dir, formatFile))
	if err != nil || strings.TrimSpace(string(got)) != `{"major":1,"minor":1}` {
		t.Fatalf("format.json after opening a pre-format directory: %q %v", got, err)
	}
}

// TestWritePreviousFormatTestdata rewrites previousFormatDir with the
// current code. Run it by hand (SLUICE_WRITE_FORMAT_TESTDATA=1) only when
// the directory must be made again; before a format change, never after it,
// or the test stops testing the previous format.
func TestWritePreviousFormatTestdata(t *testing.T) {
	if os.Getenv("SLUICE_WRITE_FORMAT_TESTDATA") == "" {
		t.Skip("set SLUICE_WRITE_FORMAT_TESTDATA=1 to rewrite " + previousFormatDir)
	}
	if err := os.RemoveAll(previousFormatDir); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	b, err := Open(Options{Dir: previousFormatDir, Logger: quietLogger(), HeadroomBytes: -1, PreallocateBytes: -1,
		SegmentBytes: 1 << 20, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := b.CreateQueue(QueueSettings{Name: "jobs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, "jobs", []SendInput{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}); err != nil {
		t.Fatal(err)
	}
	ds, err := b.Receive(ctx, "jobs", ReceiveOptions{Max: 1})
	if err != nil || len(ds) != 1 {
		t.Fatal(len(ds), err)
	}
	if err := b.Ack(ctx, "jobs", ds[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(TopicSettings{Name: "events", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSubscription(SubscriptionSettings{Topic: "events", Name: "audit", FromEarliest: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "events", []ProduceRecord{{Value: []byte("first")}, {Value: []byte("second")}}, ProduceOptions{}); err != nil {
		t.Fatal(err)
	}
	sd, err := b.SubscriptionReceive(ctx, "events", "audit", ReceiveOptions{Max: 1})
	if err != nil || len(sd) != 1 {
		t.Fatal(len(sd), err)
	}
	if err := b.SubscriptionAck(ctx, "events", "audit", sd[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The directory as the code before format.json left it; LOCK is only
	// ever locked, never read.
	for _, name := range []string{formatFile, "LOCK"} {
		if err := os.Remove(filepath.Join(previousFormatDir, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// Any bytes in format.json are an answer, never a panic: opened only when
// they name major 1, refused otherwise, and never rewritten into a major
// other than the one they named.
func FuzzCheckFormat(f *testing.F) {
	for _, s := range []string{`{"major":1,"minor":0}`, `{"major":2}`, `{"major":1,"minor":-1}`, `null`, `[]`, ``, `{"major":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewMem()
		if err := vfs.MkdirAllDurable(fsys, "/d"); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(fsys, "/d", formatFile, data); err != nil {
			t.Fatal(err)
		}
		err := checkFormat(fsys, "/d", quietLogger())
		if err != nil {
			return
		}
		got, rerr := vfs.ReadFile(fsys, "/d/"+formatFile)
		if rerr != nil {
			t.Fatal(rerr)
		}
		var f diskFormat
		if json.Unmarshal(got, &f) != nil || f.Major != FormatMajor {
			t.Fatalf("format.json %q accepted, now %q", data, got)
		}
	})
}
