//go:build !linux

package storage

import (
	"io"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// sendfileFrom is Linux-only; elsewhere WriteTo copies with positional reads.
func sendfileFrom(io.Writer, vfs.File, int64, int64) (int64, bool, error) { return 0, false, nil }
