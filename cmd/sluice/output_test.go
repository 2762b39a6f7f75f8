package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

func TestProtoJSONNumbersAndZeros(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func() ([]byte, error)
		want string
	}{
		{"zero int32 and int64 are present, as numbers", func() ([]byte, error) {
			return protoJSON(&sluicev1.PartitionOffsetResult{})
		}, `{"offset":0,"partition":0,"timestamp":null}`},
		{"uint64 beyond 2^53 stays exact", func() ([]byte, error) {
			return protoJSON(&sluicev1.SendResult{MessageId: "m", Sequence: 1<<63 + 1})
		}, `{"duplicate":false,"messageId":"m","sequence":9223372036854775809}`},
		{"nested, repeated and well-known types", func() ([]byte, error) {
			return protoJSON(&sluicev1.ListQueuesResponse{Queues: []*sluicev1.Queue{{Name: "q",
				Stats: &sluicev1.QueueStats{Visible: 3, OldestMessageAge: durationpb.New(1500000000)}}}})
		}, `"oldestMessageAge":"1.500s"`},
		{"int64 in a nested list element", func() ([]byte, error) {
			return protoJSON(&sluicev1.ListQueuesResponse{Queues: []*sluicev1.Queue{{Stats: &sluicev1.QueueStats{Visible: 3}}}})
		}, `"visible":3`},
		{"a string that looks like a number stays a string", func() ([]byte, error) {
			return protoJSON(&sluicev1.DeleteQueueRequest{Name: "42"})
		}, `{"name":"42"}`},
	} {
		got, err := tc.in()
		if err != nil || !strings.Contains(string(got), tc.want) {
			t.Errorf("%s: %s (%v); want it to contain %s", tc.name, got, err, tc.want)
		}
	}
}

func TestServerURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"localhost:8080/", "http://localhost:8080"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"https://broker.example:8443", "https://broker.example:8443"},
		{"ftp://x", ""},
		{"http://", ""},
	} {
		got, err := serverURL(tc.in)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("serverURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestFlagWords(t *testing.T) {
	cmd := withFields(&cobra.Command{Use: "x"}, "destination_queue=to")
	cmd.Flags().Duration("visibility-timeout", 0, "")
	cmd.Flags().Duration("delay", 0, "")
	cmd.Flags().String("to", "", "")
	for _, tc := range []struct{ msg, field, want string }{
		{"x is not a dead-letter queue of any queue; name a destination_queue", "", "x is not a dead-letter queue of any queue; name a --to"},
		{"visibility_timeout 13h: want 0 to 12h", "visibility_timeout", "--visibility-timeout 13h: want 0 to 12h"},
		{"delay must not be negative", "delay", "--delay must not be negative"},
		// A plain word is a flag only when it is the refused field.
		{"delay must not be negative", "", "delay must not be negative"},
		{"update_mask is required", "update_mask", "update_mask is required"},
	} {
		if got := flagWords(tc.msg, tc.field, cmd); got != tc.want {
			t.Errorf("flagWords(%q, %q) = %q, want %q", tc.msg, tc.field, got, tc.want)
		}
	}
}

func TestDescribeBuild(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		version string
		info    debug.BuildInfo
		want    string
	}{
		{"dev", debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"dev (0123456789ab, 2026-12-01T12:00:00Z, modified) go1.26"},
		{"v1.2.3", debug.BuildInfo{GoVersion: "go1.26", Settings: vcs[:1]}, "v1.2.3 (0123456789ab) go1.26"},
		{"dev", debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0 (no vcs information) go1.26"},
	} {
		if got := describeBuild(tc.version, &tc.info); got != tc.want {
			t.Errorf("describeBuild(%q) = %q, want %q", tc.version, got, tc.want)
		}
	}
}
