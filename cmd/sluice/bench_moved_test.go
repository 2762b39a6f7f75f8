package main

import (
	"strings"
	"testing"
)

// TestBenchPointsToItsBinary: `sluice bench …` from an older script fails
// with one line that names sluice-bench, whatever flags follow.
func TestBenchPointsToItsBinary(t *testing.T) {
	_, _, err := cli(t, "http://127.0.0.1:1", "", "bench", "produce", "--protocol", "kafka", "--count", "10")
	if err == nil || !strings.Contains(err.Error(), "sluice-bench") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("sluice bench: %v", err)
	}
}
