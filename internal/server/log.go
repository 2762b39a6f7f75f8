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
		opts.ReplaceAttr = durationsAsText
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
}

// durationsAsText writes a duration in JSON as Go prints it ("1.5s", "830µs"), as the
// text format does, instead of slog's integer nanoseconds, which a person reading a log
// pipeline's view has to divide and a field named "took" does not announce.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
