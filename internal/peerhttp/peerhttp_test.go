package peerhttp

import (
	"context"
	"errors"
	"net"
	"testing"
)

func TestHostAndNodeOf(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
	}{
		{Host(1), 1}, {Host(2147483647), 2147483647}, {Host(7) + ":80", 7},
		{"node-3.sluice-peer:443", 3}, {"node-0.sluice-peer", 0}, {"node--1.sluice-peer", 0},
		{"node-+1.sluice-peer", 0}, {"node-.sluice-peer", 0}, {"node-1.example.com", 0},
		{"node-2147483648.sluice-peer", 0}, {"127.0.0.1:8080", 0}, {"", 0}, {"node-1x.sluice-peer", 0},
		{"1.sluice-peer", 0}, {"node-1", 0}, {"xnode-1.sluice-peer", 0},
	} {
		if got := NodeOf(c.in); got != c.want {
			t.Errorf("NodeOf(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestDialContext: the node a Host names is dialled; any failure, the dialler's or an
// address naming no node, is a dial error (nothing was sent).
func TestDialContext(t *testing.T) {
	var asked int32
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	dc := DialContext(func(_ context.Context, node int32) (net.Conn, error) {
		asked = node
		if node == 9 {
			return nil, errors.New("refused")
		}
		return a, nil
	})
	if c, err := dc(context.Background(), "tcp", Host(4)+":80"); err != nil || c != a || asked != 4 {
		t.Fatalf("dial node 4: %v, %v, asked %d", c, err, asked)
	}
	for _, addr := range []string{Host(9) + ":80", "10.0.0.1:80"} {
		_, err := dc(context.Background(), "tcp", addr)
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Errorf("dial %s: %v, want a dial *net.OpError", addr, err)
		}
	}
}

func FuzzNodeOf(f *testing.F) {
	f.Add("node-1.sluice-peer:80")
	f.Add("node-99999999999.sluice-peer")
	f.Fuzz(func(t *testing.T, s string) {
		n := NodeOf(s)
		if n < 0 {
			t.Fatalf("NodeOf(%q) = %d", s, n)
		}
		if n > 0 && NodeOf(Host(n)) != n {
			t.Fatalf("NodeOf(Host(%d)) != %d", n, n)
		}
	})
}
