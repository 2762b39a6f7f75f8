// Package testlog is what tests give a logger (or any writer) to read back what it wrote
// while it still writes: a buffer safe for concurrent use.
//
// Only tests import it; it must never hold more than the bytes written to it.
package testlog

import (
	"strings"
	"sync"
)

// Buffer keeps everything written to it. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
