package chaos

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// get asks addr for path on a new connection, within 5 s; status 0 if it
// failed.
func get(addr, path string) (int, string) { return getWithin(addr, path, 5*time.Second) }

func getWithin(addr, path string, d time.Duration) (int, string) {
	c := http.Client{Timeout: d, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// httpConn is one keep-alive HTTP/1.1 connection driven by hand, so a test
// knows which connection each request used.
type httpConn struct {
	nc net.Conn
	br *bufio.Reader
}

func dialHTTP(t *testing.T, addr string) *httpConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &httpConn{nc: nc, br: bufio.NewReader(nc)}
}

// get asks for path on the connection (5 s at most) and returns the
// status and body; status 0 and the error if it failed.
func (c *httpConn) get(path string) (int, string) {
	_ = c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c.nc, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric finds name{listener="..."} in a /metrics body; -1 if absent.
func metric(body, name, listener string) float64 {
	prefix := fmt.Sprintf("%s{listener=%q} ", name, listener)
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return -1
}

// kafkaConn is one raw Kafka connection.
type kafkaConn struct {
	nc   net.Conn
	corr int32
}

func dialKafka(addr string) (*kafkaConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &kafkaConn{nc: nc}, nil
}

// apiVersions sends an ApiVersions v0 request and reads its answer (5 s at
// most): the cheapest full round trip of the protocol.
func (k *kafkaConn) apiVersions() error { return k.apiVersionsWithin(5 * time.Second) }

func (k *kafkaConn) apiVersionsWithin(d time.Duration) error {
	_ = k.nc.SetDeadline(time.Now().Add(d))
	k.corr++
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("chaos")).AppendRequest(nil, req, k.corr)
	if _, err := k.nc.Write(frame); err != nil {
		return err
	}
	var sz [4]byte
	if _, err := io.ReadFull(k.nc, sz[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(k.nc, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != k.corr {
		return fmt.Errorf("correlation id %d, want %d", got, k.corr)
	}
	return nil
}

// closedWithin reports whether the server closes nc within d (reading and
// discarding whatever it sends first).
func closedWithin(nc net.Conn, d time.Duration) bool {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	ne, ok := err.(net.Error)
	return !(ok && ne.Timeout())
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
