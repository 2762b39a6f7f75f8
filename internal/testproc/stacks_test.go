package testproc

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStacks runs this test binary again as a stand-in for a server stuck in one function,
// and checks that Stacks ends it and Goroutines finds that function's goroutine (and only
// goroutines naming the frames asked for).
func TestStacks(t *testing.T) {
	if os.Getenv("TESTPROC_STACKS_CHILD") == "1" {
		stuckInAFunctionWithAName()
		return
	}
	t.Setenv("TESTPROC_STACKS_CHILD", "1")
	p := Run(t, os.Args[0], "-test.run", "^TestStacks$")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.Logs(), "stuck") {
		if time.Now().After(deadline) {
			t.Fatalf("the child never said it was stuck:\n%s", p.Logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	dump := p.Stacks()
	if !strings.HasPrefix(dump, "SIGQUIT") {
		t.Fatalf("no goroutine dump:\n%s", p.Logs())
	}
	g := Goroutines(dump, "testproc.stuckInAFunctionWithAName")
	if !strings.HasPrefix(g, "goroutine ") || strings.Count(g, "\ngoroutine ") != 0 {
		t.Fatalf("want the stuck goroutine alone, got:\n%s\n\nfrom:\n%s", g, dump)
	}
	if Goroutines(dump, "no.such(*frame)") != "" {
		t.Fatal("a frame nobody is in matched")
	}
	if p.Stacks() != "" {
		t.Fatal("a second Stacks on an ended process returned a dump")
	}
}

func stuckInAFunctionWithAName() {
	fmt.Fprintln(os.Stderr, "stuck")
	time.Sleep(time.Minute)
}
