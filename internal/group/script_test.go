package group

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite expected output in testdata/*.txt")

// TestScripts runs the data-driven scripts in testdata/: each block is a
// command, a "----" line, and the output it must produce (see harness for
// the commands). Run with -rewrite to regenerate outputs after a
// deliberate change, then review the diff.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

type block struct {
	prefix    string // comments and blank lines before the command, kept by -rewrite
	cmd, want string
	line      int
}

func parseScript(t *testing.T, data string) []block {
	var blocks []block
	var prefix strings.Builder
	lines := strings.Split(strings.TrimRight(data, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			prefix.WriteString(lines[i] + "\n")
			continue
		}
		b := block{prefix: prefix.String(), cmd: l, line: i + 1}
		prefix.Reset()
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("line %d: command without ---- separator", i+1)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		b.want = strings.Join(want, "\n")
		blocks = append(blocks, b)
		prefix.WriteString("\n")
	}
	return blocks
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness()
	var rewritten strings.Builder
	for _, b := range parseScript(t, string(data)) {
		got := strings.TrimRight(h.run(t, b.cmd), "\n")
		if got == "" {
			got = "ok" // an empty output would end the block early
		}
		if *rewrite {
			fmt.Fprintf(&rewritten, "%s%s\n----\n%s\n", b.prefix, b.cmd, got)
			continue
		}
		if got != b.want {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, b.line, b.cmd, got, b.want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// epoch is the fake clock's start; scripts print times relative to it.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
