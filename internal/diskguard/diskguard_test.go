package diskguard

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
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
