package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// recovering starts a server whose setup blocks until the test ends, as a broker's does
// while it recovers, and returns the HTTP listener's base URL.
func recovering(t *testing.T) string {
	t.Helper()
	s, _ := newTestServer(t, testConfig(t))
	inSetup, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { // joined by the cleanup, which reads started
		started <- s.Start(ctx, func(context.Context, *Server) error {
			close(inSetup)
			<-release
			return nil
		})
	}()
	t.Cleanup(func() {
		close(release)
		if err := <-started; err != nil {
			t.Errorf("Start: %v", err)
		}
		cancel()
		if err := s.Wait(ctx); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	<-inSetup
	return "http://" + s.Addr(HTTP)
}

// The Go client, in each protocol it speaks, sees a call made during recovery as
// client.ErrNotReady (docs/api.md), not a bare "unavailable: 503 Service Unavailable".
func TestRecoveringClientGetsNotReady(t *testing.T) {
	base := recovering(t)
	for _, tc := range []struct {
		name  string
		proto client.Protocol
	}{
		{"connect proto", client.ProtocolConnect},
		{"connect json", client.ProtocolConnectJSON},
		{"grpc", client.ProtocolGRPC},
		{"grpc-web", client.ProtocolGRPCWeb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := client.New(base, client.WithProtocol(tc.proto)).CreateQueue(ctx, "q", nil)
			if !errors.Is(err, client.ErrNotReady) || connect.CodeOf(err) != connect.CodeUnavailable {
				t.Fatalf("CreateQueue during recovery = %v (code %v), want NOT_READY, unavailable", err, connect.CodeOf(err))
			}
		})
	}
}

// What each kind of request gets on the wire during recovery: RPC procedures an error in
// their own protocol with the NOT_READY ErrorInfo, everything else plain text; all of
// them 503 (or a protocol error status) with Retry-After.
func TestRecoveringAnswerShape(t *testing.T) {
	base := recovering(t)
	const procedure = "/sluice.v1.QueueService/CreateQueue"
	for _, tc := range []struct {
		name, method, path, ctype string
		// check reads the answer; resp.Body is read whole into body first.
		check func(t *testing.T, resp *http.Response, body []byte)
	}{
		{"connect unary json", "POST", procedure, "application/json", connectUnary},
		{"connect unary proto", "POST", procedure, "application/proto", connectUnary},
		{"connect unary charset", "POST", procedure, "application/json; charset=utf-8", connectUnary},
		{"connect stream", "POST", "/sluice.v1.StreamService/Publish", "application/connect+proto", connectStream},
		{"procedure, not an RPC content type", "POST", procedure, "text/plain", plainText},
		{"admin endpoint, JSON", "POST", "/v1/admin/cluster/elect", "application/json", plainText},
		{"other route", "GET", "/api/thing", "", plainText},
		{"deeper path", "POST", "/sluice.v1.QueueService/CreateQueue/x", "application/json", plainText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Header.Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After = %q, want 1", got)
			}
			tc.check(t, resp, body)
		})
	}
}

// connectUnary: 503 and Connect's JSON error, code unavailable, one ErrorInfo detail
// with reason NOT_READY (what the client decodes to ErrNotReady).
func connectUnary(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q; want 503, application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	checkWireError(t, body)
}

// connectStream: 200 and one end-of-stream message (flag 2) carrying the error.
func connectStream(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/connect+proto" {
		t.Fatalf("status %d, Content-Type %q; want 200, application/connect+proto", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if len(body) < 5 || body[0] != 2 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		t.Fatalf("not one end-of-stream envelope: %q", body)
	}
	var end struct{ Error json.RawMessage }
	if err := json.Unmarshal(body[5:], &end); err != nil {
		t.Fatal(err)
	}
	checkWireError(t, end.Error)
}

func checkWireError(t *testing.T, raw []byte) {
	t.Helper()
	var e struct {
		Code, Message string
		Details       []struct{ Type, Value string }
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("not a Connect error: %v: %q", err, raw)
	}
	if e.Code != "unavailable" || e.Message == "" || len(e.Details) != 1 || e.Details[0].Type != "sluice.v1.ErrorInfo" {
		t.Fatalf("Connect error = %+v, want unavailable with one sluice.v1.ErrorInfo", e)
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(e.Details[0].Value, "="))
	if err != nil {
		t.Fatal(err)
	}
	var info sluicev1.ErrorInfo
	if err := proto.Unmarshal(b, &info); err != nil || info.GetReason() != "NOT_READY" {
		t.Fatalf("ErrorInfo = %v (%v), want reason NOT_READY", &info, err)
	}
}

// plainText: what every HTTP client understands, for routes that are not RPC calls.
func plainText(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		!bytes.Contains(body, []byte("not ready: recovering")) {
		t.Fatalf("status %d, Content-Type %q, body %q; want 503 plain text", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
