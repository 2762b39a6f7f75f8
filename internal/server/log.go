package server

import (
	"fmt"
	"io"
	"log/slog"
)

// NewLogger builds the process logger from the configured level and format
// ("text" for people, "json" for log pipelines).
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
}
