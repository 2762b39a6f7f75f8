package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// shared is the one binary Build hands every test of a package whose TestMain
// runs through Main.
var shared struct {
	mu  sync.Mutex
	dir string // set by Main; "" means Build links a binary per call
	bin string // built there, once
	err error  // the build's failure, reported to every later caller too
}

// Build compiles cmd/sluice into dir and returns the binary's path. Under Main it
// builds once into Main's directory instead and returns that binary for every call:
// linking cmd/sluice costs 5-10 s of a 2-core machine, and internal/cluster/e2e alone
// started 22 clusters.
func Build(t testing.TB, dir string) string {
	t.Helper()
	shared.mu.Lock()
	if shared.dir == "" {
		shared.mu.Unlock() // parallel tests link side by side, as without Main
		bin, err := build(dir)
		if err != nil {
			t.Fatal(err)
		}
		return bin
	}
	defer shared.mu.Unlock()
	if shared.bin == "" && shared.err == nil {
		shared.bin, shared.err = build(shared.dir)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.bin
}

func build(dir string) (string, error) {
	bin := filepath.Join(dir, "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-mq/sluice/cmd/sluice").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// Main runs m's tests with one sluice binary for all of them (see Build), removed
// afterwards, and returns m.Run's code: a package's
//
//	func TestMain(m *testing.M) { os.Exit(testproc.Main(m)) }
//
// The build happens on first use, so a run of tests that start no binary pays nothing.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-testproc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared.mu.Lock()
	shared.dir = dir
	shared.mu.Unlock()
	return m.Run()
}

// BuildAt compiles cmd/sluice as it was at commit, a revision of the git repository the
// test runs in, into dir, and returns the binary's path: an older sluice, for an upgrade
// test. A shallow clone that lacks commit fetches it from origin; when that fails too the
// test is skipped with a message that says so (it cannot run without the older source),
// and fails when the tree is no git repository at all.
func BuildAt(t testing.TB, dir, commit string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("BuildAt %s: not in a git repository: %v", commit, err)
	}
	repo := strings.TrimSpace(string(top))
	if exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run() != nil {
		out, err := exec.Command("git", "-C", repo, "fetch", "--depth=1", "origin", commit).CombinedOutput()
		if err != nil {
			t.Skipf("SKIPPED, NOT RUN: this clone's history lacks %s, the older build this test upgrades from, "+
				"and fetching it failed (%v: %s); run it in a full clone (git fetch --unshallow)", commit, err, out)
		}
	}
	src := filepath.Join(dir, "src-"+commit)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("git", "-C", repo, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var archiveErr strings.Builder
	archive.Stderr = &archiveErr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s (the test needs the repository's full history): %v\n%s", commit, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar %s: %v", commit, err)
	}
	bin := filepath.Join(dir, "sluice-"+commit)
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build at %s: %v\n%s", commit, err, out)
	}
	return bin
}
