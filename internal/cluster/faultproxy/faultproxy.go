// Package faultproxy is a fault-injecting TCP proxy for tests: it sits between a client and
// a server on loopback (between one node's transport and another's listener) and, on
// command, passes bytes through, delays them, blackholes them, stalls, or cuts every
// connection.
//
// It owns its listener, the connections it accepted, the ones it dialled to the target and
// the goroutines pumping bytes between them. Faults apply per direction (Up: client to
// server; Down: server to client) and take effect on live connections at once, except Cut,
// which closes them (and refuses new ones until the mode changes).
//
// It must never be linked into the server: it is test infrastructure outside _test files
// so several packages' tests can share it. It knows bytes only, never what they mean.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what a direction does with the bytes sent on it.
type Mode int

const (
	// Pass forwards bytes (after the direction's delay).
	Pass Mode = iota
	// Blackhole reads and discards them: the sender sees its writes succeed and never an
	// answer, as with a peer behind a dropping firewall on a connection already set up.
	Blackhole
	// Stall stops reading: once the socket buffers fill, the sender's writes block, as
	// with a peer whose process stopped reading.
	Stall
	// Cut closes every connection and refuses new ones (accepted, then closed at once).
	Cut
)

// Direction is one way through the proxy.
type Direction int

const (
	Up   Direction = iota // client to server
	Down                  // server to client
)

// Proxy forwards connections accepted on Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex // guards everything below
	modes  [2]Mode
	delays [2]time.Duration
	conns  map[*pair]struct{}
	closed bool
	wake   chan struct{} // closed and replaced when a mode changes: stalled pumps look again

	wg sync.WaitGroup

	Accepted  atomic.Uint64 // connections accepted
	Forwarded [2]atomic.Uint64
	Discarded [2]atomic.Uint64 // bytes a Blackhole swallowed
}

// New listens on 127.0.0.1 (a free port) and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pair]struct{}{}, wake: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set puts both directions in mode m.
func (p *Proxy) Set(m Mode) { p.SetDirection(Up, m); p.SetDirection(Down, m) }

// SetDirection puts one direction in mode m. Cut in either direction cuts the connection.
func (p *Proxy) SetDirection(d Direction, m Mode) {
	p.mu.Lock()
	p.modes[d] = m
	close(p.wake)
	p.wake = make(chan struct{})
	var cut []*pair
	if m == Cut {
		for c := range p.conns {
			cut = append(cut, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
}

// SetDelay makes direction d hold every chunk of bytes for at least delay before
// forwarding it (in order); 0 forwards at once.
func (p *Proxy) SetDelay(d Direction, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delays[d] = delay
}

// CutAll closes every live connection, leaving the modes as they are: new connections are
// accepted again at once (unless a direction is Cut), as after a network blip.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	var cut []*pair
	for c := range p.conns {
		cut = append(cut, c)
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
}

// Close stops the proxy and closes every connection; it returns once its goroutines have.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) state(d Direction) (Mode, time.Duration, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.modes[d], p.delays[d], p.wake
}

func (p *Proxy) cut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.modes[Up] == Cut || p.modes[Down] == Cut
}

// pair is one proxied connection: the client's and the one dialled to the target.
type pair struct {
	client, server net.Conn
	end            chan struct{} // closed with the connections: stalled pumps give up
	once           sync.Once
}

func (c *pair) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
		close(c.end)
	})
}

func (p *Proxy) track(c *pair) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c *pair) {
	c.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		p.Accepted.Add(1)
		if p.cut() {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	c := &pair{client: client, server: server, end: make(chan struct{})}
	if !p.track(c) {
		c.close()
		return
	}
	defer p.untrack(c)
	done := make(chan struct{}, 2)
	for _, d := range []struct {
		dir      Direction
		src, dst net.Conn
	}{{Up, client, server}, {Down, server, client}} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pump(d.dir, d.src, d.dst, c.end)
			done <- struct{}{}
		}()
	}
	<-done // either way ending ends the connection
}

type chunk struct {
	at   time.Time
	data []byte
}

// pump copies src to dst under direction d's mode: a reader that applies the mode, and a
// writer that holds each chunk for the delay (a delay line keeps the order and does not
// cut the throughput to one chunk per delay).
func (p *Proxy) pump(d Direction, src, dst net.Conn, end <-chan struct{}) {
	defer func() { _ = src.Close(); _ = dst.Close() }()
	line := make(chan chunk, 256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _ = dst.Close() }()
		for c := range line {
			_, delay, _ := p.state(d)
			if wait := time.Until(c.at.Add(delay)); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := dst.Write(c.data); err != nil {
				_ = src.Close()
				for range line { // drain, so the reader never blocks on a dead writer
				}
				return
			}
			p.Forwarded[d].Add(uint64(len(c.data)))
		}
	}()
	defer wg.Wait()
	defer close(line)
	buf := make([]byte, 32<<10)
	for {
		mode, _, wake := p.state(d)
		if mode == Stall {
			select { // stop reading until the mode changes or the connection ends
			case <-wake:
				continue
			case <-end:
				return
			}
		}
		n, err := src.Read(buf)
		if n > 0 && !p.pass(d, buf[:n], line, end) {
			return
		}
		if err != nil {
			return
		}
	}
}

// pass disposes of bytes read under the mode in force now: a read already waiting when
// the direction stalled holds its bytes until the mode changes. It reports false if the
// connection ended meanwhile.
func (p *Proxy) pass(d Direction, b []byte, line chan<- chunk, end <-chan struct{}) bool {
	for {
		mode, _, wake := p.state(d)
		switch mode {
		case Stall:
			select {
			case <-wake:
				continue
			case <-end:
				return false
			}
		case Blackhole:
			p.Discarded[d].Add(uint64(len(b)))
		default:
			line <- chunk{at: time.Now(), data: append([]byte(nil), b...)}
		}
		return true
	}
}
