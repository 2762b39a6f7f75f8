//go:build !linux

package storage

import "io"

// sendfile is Linux-only; elsewhere WriteTo copies with positional reads.
func sendfile(io.Writer, Section) (int64, bool, error) { return 0, false, nil }
