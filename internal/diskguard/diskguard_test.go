package diskguard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The headroom is reserved at New (fallocate on the real file system),
// released by the first ENOSPC, written back by Recover once it fits.
func TestHeadroomLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   func(t *testing.T) (vfs.FS, string, *vfs.ErrorFS)
	}{
		{"os", func(t *testing.T) (vfs.FS, string, *vfs.ErrorFS) { return vfs.Default, t.TempDir(), nil }},
		{"limited", func(t *testing.T) (vfs.FS, string, *vfs.ErrorFS) {
			efs := vfs.NewErrorFS(vfs.NewMem())
			if err := efs.MkdirAll("/d"); err != nil {
				t.Fatal(err)
			}
			return efs, "/d", efs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys, dir, efs := tc.fs(t)
			g, err := New(fsys, dir, 1<<20, quiet(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := fsys.Stat(filepath.Join(dir, headroomFile)); err != nil || st.Size() != 1<<20 {
				t.Fatalf("headroom file: %v %v", st, err)
			}
			if g.Admit() != nil || g.Health() != nil {
				t.Fatal("a fresh guard refuses writes")
			}
			full := fmt.Errorf("write /secret/path: %w", syscall.ENOSPC)
			err = g.Note(full)
			if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) || err.Error() != ErrFull.Error() {
				t.Fatalf("Note(ENOSPC) = %v", err)
			}
			if _, err := fsys.Stat(filepath.Join(dir, headroomFile)); err == nil {
				t.Fatal("the headroom was not released")
			}
			if !errors.Is(g.Admit(), ErrFull) || !errors.Is(g.Health(), ErrFull) {
				t.Fatal("a full guard admits writes")
			}
			if efs != nil {
				for _, space := range []int64{1 << 19, 3 << 19} {
					// Less than the headroom; then room for the headroom
					// but not for as much again, as on a disk that is
					// still full once the released headroom is counted.
					efs.SetSpace(space)
					g.Recover()
					if g.Health() == nil {
						t.Fatalf("recovered with %d bytes free for a headroom of %d", space, 1<<20)
					}
					if efs.Space() != space {
						t.Fatalf("a failed recovery kept %d bytes of the %d free", space-efs.Space(), space)
					}
				}
				efs.SetSpace(vfs.Unlimited)
			}
			g.Recover()
			if g.Health() != nil || g.Admit() != nil {
				t.Fatalf("not recovered: %v", g.Health())
			}
			if st, err := fsys.Stat(filepath.Join(dir, headroomFile)); err != nil || st.Size() != 1<<20 {
				t.Fatalf("headroom after recovery: %v %v", st, err)
			}
		})
	}
}

// An I/O error is reported (Health) but does not refuse writes; other
// errors pass through untouched.
func TestIOErrorAndOthers(t *testing.T) {
	g, err := New(vfs.NewMem(), "/", 0, quiet(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	other := errors.New("not the disk's")
	if got := g.Note(other); got != other || g.Health() != nil {
		t.Fatalf("Note(other) = %v, health %v", got, g.Health())
	}
	if err := g.Note(syscall.EIO); !errors.Is(err, ErrFailed) {
		t.Fatalf("Note(EIO) = %v", err)
	}
	if g.Admit() != nil || !errors.Is(g.Health(), ErrFailed) {
		t.Fatalf("admit %v health %v", g.Admit(), g.Health())
	}
	g.Recover() // a probe write on the in-memory FS works
	if g.Health() != nil {
		t.Fatal(g.Health())
	}
}

// sizedFS is a disk of size bytes: ErrorFS models its free space, DiskSize
// its size, as statfs(2) tells the guard on the real disk.
type sizedFS struct {
	*vfs.ErrorFS
	size int64
}

func (f sizedFS) DiskSize(string) (int64, bool) { return f.size, true }

// The headroom is at most 1/8 of the disk: a disk smaller than the
// configured headroom holds the lowered one, starts writable (it used to
// start full, for good: the headroom never fit, so Recover never left the
// state), and fills and recovers as any other.
func TestHeadroomCappedToDisk(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name     string
		size     int64 // of the disk; 0: unknown (no DiskSize)
		free     int64 // at start
		headroom int64 // configured
		want     int64 // the headroom file
	}{
		{"disk much larger", 1 << 40, 8 * mib, 1 * mib, 1 * mib},
		{"disk of eight headrooms", 8 * mib, 8 * mib, 1 * mib, 1 * mib},
		{"disk just under eight headrooms", 8*mib - 8, 8*mib - 8, 1 * mib, 1*mib - 1},
		{"disk smaller than headroom", 20 * mib, 20 * mib, DefaultHeadroom, 20 * mib / 8},
		{"tiny disk", 64 << 10, 64 << 10, DefaultHeadroom, 8 << 10},
		{"size unknown", 0, 8 * mib, 1 * mib, 1 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			efs := vfs.NewErrorFS(vfs.NewMem())
			var fsys vfs.FS = efs
			if tc.size > 0 {
				fsys = sizedFS{efs, tc.size}
			}
			if err := fsys.MkdirAll("/d"); err != nil {
				t.Fatal(err)
			}
			efs.SetSpace(tc.free)
			var logs bytes.Buffer
			g, err := New(fsys, "/d", tc.headroom, slog.New(slog.NewTextHandler(&logs, nil)), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if st, err := fsys.Stat("/d/" + headroomFile); err != nil || st.Size() != tc.want {
				t.Fatalf("headroom file: %v %v, want %d bytes", st, err, tc.want)
			}
			if g.Admit() != nil || g.Health() != nil {
				t.Fatalf("an empty disk refuses writes: %v", g.Health())
			}
			warned := strings.Count(logs.String(), "disk headroom lowered")
			if lowered := tc.want < tc.headroom; warned != map[bool]int{true: 1}[lowered] {
				t.Fatalf("lowered %v, warned %d times:\n%s", lowered, warned, &logs)
			}
			if tc.want < tc.headroom && !strings.Contains(logs.String(), fmt.Sprintf("disk_size=\"%.1f MiB\"", float64(tc.size)/mib)) {
				t.Fatalf("the warning does not name the disk's size:\n%s", &logs)
			}

			// The disk fills: the headroom, as lowered, is released for the
			// acks and deletes, and comes back only with room for two.
			efs.SetSpace(0)
			if err := g.Note(syscall.ENOSPC); !errors.Is(err, ErrFull) || !errors.Is(g.Admit(), ErrFull) {
				t.Fatalf("Note(ENOSPC) = %v, Admit %v", err, g.Admit())
			}
			if efs.Space() != tc.want {
				t.Fatalf("released %d bytes, want the headroom's %d", efs.Space(), tc.want)
			}
			g.Recover()
			if g.Health() == nil {
				t.Fatal("recovered with only the released headroom free")
			}
			efs.SetSpace(2 * tc.want)
			g.Recover()
			if g.Health() != nil || g.Admit() != nil {
				t.Fatalf("not recovered with room for two headrooms: %v", g.Health())
			}
			if st, err := fsys.Stat("/d/" + headroomFile); err != nil || st.Size() != tc.want {
				t.Fatalf("headroom after recovery: %v %v, want %d bytes", st, err, tc.want)
			}
			if warned := strings.Count(logs.String(), "disk headroom lowered"); warned > 1 {
				t.Fatalf("warned %d times", warned)
			}
		})
	}
}

// statfs(2) reads the real disk's size, which caps the headroom on vfs.Default.
func TestDiskSpace(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no statfs here: the headroom is as configured")
	}
	if free, size := DiskSpace(t.TempDir()); size == 0 || free > size {
		t.Fatalf("DiskSpace = %d free of %d", free, size)
	}
	if free, size := DiskSpace(filepath.Join(t.TempDir(), "missing")); free != 0 || size != 0 {
		t.Fatalf("a missing directory: %d free of %d", free, size)
	}
}
