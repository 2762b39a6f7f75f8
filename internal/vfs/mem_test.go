package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// exists reports whether name exists, failing on any other error.
func exists(t *testing.T, fsys vfs.FS, name string) bool {
	t.Helper()
	_, err := fsys.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	must(t, err)
	return true
}

// TestCrash checks what survives a crash. Each case acts on a MemFS whose
// /d directory exists durably, then the FS crashes and check looks at it.
func TestCrash(t *testing.T) {
	tests := []struct {
		name  string
		act   func(t *testing.T, m *vfs.MemFS)
		check func(t *testing.T, m *vfs.MemFS)
	}{
		{"unsynced file and entry are lost",
			func(t *testing.T, m *vfs.MemFS) { create(t, m, "/d/f", "data") },
			func(t *testing.T, m *vfs.MemFS) {
				if exists(t, m, "/d/f") {
					t.Fatal("unsynced file survived")
				}
			}},
		{"synced file without SyncDir is lost",
			func(t *testing.T, m *vfs.MemFS) { must(t, create(t, m, "/d/f", "data").Sync()) },
			func(t *testing.T, m *vfs.MemFS) {
				if exists(t, m, "/d/f") {
					t.Fatal("entry survived without SyncDir")
				}
			}},
		{"SyncDir without file Sync keeps an empty file",
			func(t *testing.T, m *vfs.MemFS) {
				create(t, m, "/d/f", "data")
				must(t, m.SyncDir("/d"))
			},
			func(t *testing.T, m *vfs.MemFS) {
				if got := readAll(t, m, "/d/f"); got != "" {
					t.Fatalf("contents %q, want empty", got)
				}
			}},
		{"unsynced tail is dropped",
			func(t *testing.T, m *vfs.MemFS) {
				f := create(t, m, "/d/f", "durable")
				must(t, f.Sync())
				must(t, m.SyncDir("/d"))
				_, err := f.Write([]byte(" lost"))
				must(t, err)
			},
			func(t *testing.T, m *vfs.MemFS) {
				if got := readAll(t, m, "/d/f"); got != "durable" {
					t.Fatalf("contents %q", got)
				}
			}},
		{"unsynced truncate is undone",
			func(t *testing.T, m *vfs.MemFS) {
				f := create(t, m, "/d/f", "0123456789")
				must(t, f.Sync())
				must(t, m.SyncDir("/d"))
				must(t, f.Truncate(3))
				_, err := f.Write([]byte("xyz"))
				must(t, err)
			},
			func(t *testing.T, m *vfs.MemFS) {
				if got := readAll(t, m, "/d/f"); got != "0123456789" {
					t.Fatalf("contents %q", got)
				}
			}},
		{"unsynced remove is undone",
			func(t *testing.T, m *vfs.MemFS) {
				must(t, create(t, m, "/d/f", "keep").Sync())
				must(t, m.SyncDir("/d"))
				must(t, m.Remove("/d/f"))
			},
			func(t *testing.T, m *vfs.MemFS) {
				if got := readAll(t, m, "/d/f"); got != "keep" {
					t.Fatalf("contents %q", got)
				}
			}},
		{"synced remove sticks",
			func(t *testing.T, m *vfs.MemFS) {
				must(t, create(t, m, "/d/f", "gone").Sync())
				must(t, m.SyncDir("/d"))
				must(t, m.Remove("/d/f"))
				must(t, m.SyncDir("/d"))
			},
			func(t *testing.T, m *vfs.MemFS) {
				if exists(t, m, "/d/f") {
					t.Fatal("removed file came back")
				}
			}},
		{"unsynced rename is undone",
			func(t *testing.T, m *vfs.MemFS) {
				must(t, create(t, m, "/d/tmp", "v1").Sync())
				must(t, m.SyncDir("/d"))
				must(t, m.Rename("/d/tmp", "/d/final"))
			},
			func(t *testing.T, m *vfs.MemFS) {
				if exists(t, m, "/d/final") || readAll(t, m, "/d/tmp") != "v1" {
					t.Fatal("rename survived without SyncDir")
				}
			}},
		{"synced rename replaces atomically",
			func(t *testing.T, m *vfs.MemFS) {
				must(t, create(t, m, "/d/final", "v1").Sync())
				must(t, create(t, m, "/d/tmp", "v2").Sync())
				must(t, m.SyncDir("/d"))
				must(t, m.Rename("/d/tmp", "/d/final"))
				must(t, m.SyncDir("/d"))
			},
			func(t *testing.T, m *vfs.MemFS) {
				names, err := m.List("/d")
				must(t, err)
				if !slices.Equal(names, []string{"final"}) || readAll(t, m, "/d/final") != "v2" {
					t.Fatalf("after crash: %v", names)
				}
			}},
		{"cross-directory rename with only the target synced leaves both names",
			func(t *testing.T, m *vfs.MemFS) {
				must(t, m.MkdirAll("/d/a"))
				must(t, m.MkdirAll("/d/b"))
				must(t, m.SyncDir("/d"))
				must(t, create(t, m, "/d/a/f", "x").Sync())
				must(t, m.SyncDir("/d/a"))
				must(t, m.Rename("/d/a/f", "/d/b/f"))
				must(t, m.SyncDir("/d/b"))
			},
			func(t *testing.T, m *vfs.MemFS) {
				if readAll(t, m, "/d/a/f") != "x" || readAll(t, m, "/d/b/f") != "x" {
					t.Fatal("want the file under both names")
				}
			}},
		{"directory needs its parent synced",
			func(t *testing.T, m *vfs.MemFS) {
				must(t, m.MkdirAll("/d/p/q"))
				must(t, m.SyncDir("/d/p"))
			},
			func(t *testing.T, m *vfs.MemFS) {
				if exists(t, m, "/d/p") {
					t.Fatal("directory survived without its parent synced")
				}
			}},
		{"SyncAll makes everything durable",
			func(t *testing.T, m *vfs.MemFS) {
				must(t, m.MkdirAll("/d/p/q"))
				create(t, m, "/d/p/q/f", "all")
				m.SyncAll()
			},
			func(t *testing.T, m *vfs.MemFS) {
				if got := readAll(t, m, "/d/p/q/f"); got != "all" {
					t.Fatalf("contents %q", got)
				}
			}},
	}
	crashes := []struct {
		name  string
		crash func(m *vfs.MemFS) *vfs.MemFS
	}{
		{"Crash", func(m *vfs.MemFS) *vfs.MemFS { m.Crash(); return m }},
		{"CrashClone", func(m *vfs.MemFS) *vfs.MemFS { return m.CrashClone() }},
	}
	for _, c := range crashes {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					m := vfs.NewMem()
					must(t, m.MkdirAll("/d"))
					m.SyncAll()
					tc.act(t, m)
					tc.check(t, c.crash(m))
				})
			}
		})
	}
}

func TestCrashKillsOpenFiles(t *testing.T) {
	m := vfs.NewMem()
	f := create(t, m, "/f", "abc")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	m.Crash()
	_, err := f.Write([]byte("more"))
	wantErrIs(t, err, vfs.ErrCrashed)
	wantErrIs(t, err, os.ErrClosed)
	_, err = f.ReadAt(make([]byte, 1), 0)
	wantErrIs(t, err, vfs.ErrCrashed)
	wantErrIs(t, f.Sync(), vfs.ErrCrashed)
	wantErrIs(t, f.Truncate(0), vfs.ErrCrashed)
	_, err = f.Size()
	wantErrIs(t, err, vfs.ErrCrashed)
	// A file opened after the crash works.
	g, err := m.OpenAppend("/f")
	must(t, err)
	_, err = g.Write([]byte("def"))
	must(t, err)
	if got := readAll(t, m, "/f"); got != "abcdef" {
		t.Fatalf("contents %q", got)
	}
}

func TestCrashCloneLeavesOriginal(t *testing.T) {
	m := vfs.NewMem()
	f := create(t, m, "/f", "synced")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	_, err := f.Write([]byte("+unsynced"))
	must(t, err)
	c := m.CrashClone()
	// Both go on independently: writes to one never show in the other.
	_, err = f.Write([]byte("+more"))
	must(t, err)
	g, err := c.OpenAppend("/f")
	must(t, err)
	_, err = g.Write([]byte("+clone"))
	must(t, err)
	if got := readAll(t, m, "/f"); got != "synced+unsynced+more" {
		t.Fatalf("original %q", got)
	}
	if got := readAll(t, c, "/f"); got != "synced+clone" {
		t.Fatalf("clone %q", got)
	}
}

func TestCrashWithTornWrites(t *testing.T) {
	const synced, unsynced = "synced-prefix|", "0123456789abcdefghijklmnopqrstuvwxyz"
	lengths := map[int]bool{}
	garbled := 0
	for seed := range uint64(200) {
		m := vfs.NewMem()
		f := create(t, m, "/f", synced)
		must(t, f.Sync())
		must(t, m.SyncDir("/"))
		_, err := f.Write([]byte(unsynced))
		must(t, err)
		create(t, m, "/never-synced-entry", "x")
		m.CrashWithTornWrites(rand.New(rand.NewPCG(seed, 1)))

		got := readAll(t, m, "/f")
		if !strings.HasPrefix(got, synced) || len(got) > len(synced)+len(unsynced) {
			t.Fatalf("seed %d: %q does not keep the synced bytes", seed, got)
		}
		kept := got[len(synced):]
		want := unsynced[:len(kept)]
		// All but the last TornGarbleMax kept bytes are exact.
		exact := max(0, len(kept)-vfs.TornGarbleMax)
		if kept[:exact] != want[:exact] {
			t.Fatalf("seed %d: kept %q is not a prefix of %q", seed, kept, unsynced)
		}
		if kept != want {
			garbled++
		}
		lengths[len(kept)] = true
		if exists(t, m, "/never-synced-entry") {
			t.Fatalf("seed %d: unsynced entry survived", seed)
		}
	}
	if len(lengths) < 10 || garbled == 0 {
		t.Fatalf("torn writes not random enough: %d lengths, %d garbled", len(lengths), garbled)
	}
	// A file truncated since its last sync goes back to its synced bytes.
	m := vfs.NewMem()
	f := create(t, m, "/t", "0123456789")
	must(t, f.Sync())
	must(t, m.SyncDir("/"))
	must(t, f.Truncate(2))
	_, err := f.Write([]byte("abcdefghijklmnop"))
	must(t, err)
	m.CrashWithTornWrites(rand.New(rand.NewPCG(7, 7)))
	if got := readAll(t, m, "/t"); got != "0123456789" {
		t.Fatalf("truncated file after torn crash: %q", got)
	}

	// The same seed gives the same result.
	run := func() string {
		m := vfs.NewMem()
		for i := range 5 {
			f := create(t, m, fmt.Sprintf("/f%d", i), "base")
			must(t, f.Sync())
			_, err := f.Write(bytes.Repeat([]byte{'x'}, 100))
			must(t, err)
		}
		must(t, m.SyncDir("/"))
		m.CrashWithTornWrites(rand.New(rand.NewPCG(42, 42)))
		var all string
		for i := range 5 {
			all += readAll(t, m, fmt.Sprintf("/f%d", i)) + "|"
		}
		return all
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("not deterministic:\n%q\n%q", a, b)
	}
}

// TestMemConcurrent is for -race: many goroutines on one MemFS.
func TestMemConcurrent(t *testing.T) {
	m := vfs.NewMem()
	must(t, m.MkdirAll("/d"))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			name := fmt.Sprintf("/d/f%d", g)
			f, err := m.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range 100 {
				if _, err := f.Write([]byte("0123456789")); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					_ = f.Sync()
					_ = m.SyncDir("/d")
				}
				_, _ = f.ReadAt(make([]byte, 10), int64(i*10))
				_, _ = m.List("/d")
				_ = m.CrashClone()
			}
		})
	}
	wg.Wait()
	for g := range 4 {
		if got := readAll(t, m, fmt.Sprintf("/d/f%d", g)); len(got) != 1000 {
			t.Fatalf("f%d has %d bytes", g, len(got))
		}
	}
}
