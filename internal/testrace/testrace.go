// Package testrace lets a test say it runs without the race detector.
//
// make test runs the unit tests with -race. A few tests drive one
// goroutine through thousands of steps: the model tests (a random history
// checked against a reference) and the crash tests (a power cut at every
// write, each reopened and checked). Under -race they run ten times slower
// (TestCleanCrashAtEveryPoint: 6.5 s, 70 s with -race) and the detector has
// little to watch: the test is one goroutine, and the concurrency of the
// code under them has tests of its own that do run with -race. Such a test
// calls NotUnderRace(t) first; under -race it skips, saying where it runs
// instead: scripts/norace-tests.sh, the second half of make unit, finds
// every test that calls it and runs them without -race, and fails if one
// of them did not pass. So no test is skipped by the suite as a whole.
//
// It owns that one decision and must never be imported outside _test.go
// files.
package testrace

import "testing"

// Enabled reports whether the binary was built with -race.
const Enabled = raceEnabled

// NotUnderRace skips t under -race: scripts/norace-tests.sh runs it
// without. Call it first in the test's body, where that script looks.
func NotUnderRace(t testing.TB) {
	t.Helper()
	if Enabled {
		t.Skip("one goroutine through thousands of steps, ten times slower under -race: make unit runs it without -race (scripts/norace-tests.sh)")
	}
}
