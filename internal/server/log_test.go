package server

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLogDurations: a duration is logged as Go prints it in both formats ("1.5s"), not
// as integer nanoseconds in JSON.
func TestLogDurations(t *testing.T) {
	for format, want := range map[string]string{"json": `"took":"1.5s"`, "text": "took=1.5s"} {
		var out bytes.Buffer
		l, err := NewLogger(&out, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		l.Info("closed", "took", 1500*time.Millisecond, "count", 3)
		if !strings.Contains(out.String(), want) {
			t.Errorf("%s: %s, want %s", format, out.String(), want)
		}
	}
}
