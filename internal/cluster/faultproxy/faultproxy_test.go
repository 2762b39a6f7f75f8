package faultproxy

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echo serves an echo server on loopback until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads its echo within d; it reports whether it came back.
func roundTrip(t *testing.T, c net.Conn, msg string, d time.Duration) (bool, error) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		return false, err
	}
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, nil
		}
		return false, err
	}
	if string(buf) != msg {
		t.Fatalf("echo %q, want %q", buf, msg)
	}
	return true, nil
}

func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func TestModes(t *testing.T) {
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p)
	if ok, err := roundTrip(t, c, "pass", 2*time.Second); !ok || err != nil {
		t.Fatalf("pass: %v %v", ok, err)
	}

	p.SetDirection(Down, Blackhole) // the server's answers vanish; the connection stays up
	if ok, err := roundTrip(t, c, "hole", 100*time.Millisecond); ok || err != nil {
		t.Fatalf("blackhole down: %v %v", ok, err)
	}
	if p.Discarded[Down].Load() == 0 {
		t.Fatal("nothing counted as discarded")
	}
	p.Set(Pass)
	if ok, err := roundTrip(t, c, "back", 2*time.Second); !ok || err != nil {
		t.Fatalf("after the blackhole: %v %v", ok, err)
	}

	p.SetDirection(Up, Stall) // nothing read from the client: held, then delivered in order
	// The counter moves after the write that forwarded "back" returned, which may be
	// after its echo reached us: wait for all 12 bytes sent so far to be counted.
	for deadline := time.Now().Add(2 * time.Second); p.Forwarded[Up].Load() < uint64(len("passholeback")); {
		if time.Now().After(deadline) {
			t.Fatalf("forwarded up %d bytes, want 12", p.Forwarded[Up].Load())
		}
		time.Sleep(time.Millisecond)
	}
	up := p.Forwarded[Up].Load()
	if ok, err := roundTrip(t, c, "held", 100*time.Millisecond); ok || err != nil {
		t.Fatalf("stall: %v %v", ok, err)
	}
	if p.Forwarded[Up].Load() != up {
		t.Fatal("a stalled direction forwarded bytes")
	}
	p.Set(Pass)
	buf := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after the stall: %q %v", buf, err)
	}
	_ = c.SetReadDeadline(time.Time{})

	p.SetDelay(Up, 150*time.Millisecond)
	start := time.Now()
	if ok, err := roundTrip(t, c, "slow", 2*time.Second); !ok || err != nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("delay: %v %v after %v", ok, err, time.Since(start))
	}
	p.SetDelay(Up, 0)

	p.Set(Cut) // live connections closed, new ones refused
	if !closed(c) {
		t.Fatal("a cut connection is still open")
	}
	if c2 := dial(t, p); !closed(c2) {
		t.Fatal("a connection made while cut is open")
	}
	p.Set(Pass)
	c3 := dial(t, p)
	if ok, err := roundTrip(t, c3, "healed", 2*time.Second); !ok || err != nil {
		t.Fatalf("after the cut: %v %v", ok, err)
	}
	p.CutAll() // a blip: this one is closed, the next works
	if !closed(c3) {
		t.Fatal("CutAll left a connection open")
	}
	if ok, err := roundTrip(t, dial(t, p), "again", 2*time.Second); !ok || err != nil {
		t.Fatalf("after CutAll: %v %v", ok, err)
	}
}

// TestCloseWithStalledConnections: Close returns even while pumps wait on a stall.
func TestCloseWithStalledConnections(t *testing.T) {
	p, err := New(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if ok, err := roundTrip(t, c, "x", 2*time.Second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	p.Set(Stall)
	done := make(chan struct{})
	go func() { _ = p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on stalled connections")
	}
}
