package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

func TestReadLimits(t *testing.T) {
	o := testOptions(t, vfs.NewMem(), "/p")
	o.SegmentBytes = 3000
	o.IndexIntervalBytes = 200
	l := mustOpen(t, o)
	defer l.Close()
	big := mkBatch(t, 3, 1000, 1) // ~3 KiB: alone in its segment
	small := mkBatch(t, 1, 10, 2)
	// Segments: [0 1] [2-4] [5 6 7].
	for _, b := range [][]byte{small, small, big, small, small, small} {
		mustAppend(t, l, b)
	}
	for _, tc := range []struct {
		name     string
		offset   int64
		maxBytes int
		batches  int
		err      error
	}{
		{"one-small", 0, len(small), 1, nil},
		{"two-small", 0, 2*len(small) + 1, 2, nil},
		{"max-ends-in-a-length-prefix", 5, len(small) + 5, 1, nil},
		{"max-ends-in-a-header", 5, len(small) + 30, 1, nil},
		{"stops-at-segment-end", 0, 1 << 20, 2, nil},
		{"big-batch-even-if-over-max", 2, 1, 1, nil},
		{"mid-big-batch", 4, 10, 1, nil},
		{"next-segment", 5, 1 << 20, 3, nil},
		{"at-hw", 8, 100, 0, nil},
		{"past-hw", 9, 100, 0, ErrOffsetOutOfRange},
		{"negative", -1, 100, 0, ErrOffsetOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := l.Read(tc.offset, tc.maxBytes)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			n := 0
			for len(b) > 0 {
				size, err := batch.FrameSize(b)
				if err != nil || batch.Validate(b[:size], 0) != nil {
					t.Fatal("partial or bad batch returned")
				}
				b = b[size:]
				n++
			}
			if n != tc.batches {
				t.Fatalf("%d batches, want %d", n, tc.batches)
			}
			s, err := l.ReadSection(tc.offset, tc.maxBytes)
			if !errors.Is(err, tc.err) {
				t.Fatalf("section err %v", err)
			}
			var buf bytes.Buffer
			if _, err := s.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			direct, _ := l.Read(tc.offset, tc.maxBytes)
			if !bytes.Equal(buf.Bytes(), direct) {
				t.Fatalf("section (%d bytes) differs from Read (%d bytes)", buf.Len(), len(direct))
			}
			if q := l.Quarantined(); len(q) != 0 {
				t.Fatalf("a read of good batches quarantined %+v", q)
			}
		})
	}
}

// TestSendfileOverTCP sends sections of one segment to several loopback
// connections at once and checks every byte: sendfile must use its own
// offset, not the file's shared seek position.
func TestSendfileOverTCP(t *testing.T) {
	o := testOptions(t, vfs.Default, t.TempDir())
	l := mustOpen(t, o)
	defer l.Close()
	for i := range 200 {
		mustAppend(t, l, mkBatch(t, 1+i%5, 300, int64(i)))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const conns = 6
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for i := range 2 * conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if i < conns {
				err = receiveLog(l, ln)
			} else {
				err = sendLog(l, ln.Addr().String(), i%2 == 0)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// sendLog sends the whole log over one connection in sections of about
// 8 KiB, through Section.WriteTo or straight through sendfile.
func sendLog(l *Log, addr string, viaWriteTo bool) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	for off := int64(0); off < l.HighWatermark(); {
		s, err := l.ReadSection(off, 8<<10)
		if err != nil {
			return err
		}
		if viaWriteTo { // the method a front-end calls
			_, err = s.WriteTo(c)
		} else if _, handled, serr := sendfile(c, s); !handled {
			err = errors.New("sendfile did not handle a TCP socket and an OS file")
		} else {
			err = serr
		}
		if err != nil {
			return err
		}
		sent, _ := l.Read(off, int(s.Length))
		for len(sent) > 0 {
			h, _ := batch.ParseHeader(sent)
			off, sent = h.NextOffset(), sent[h.Size():]
		}
	}
	return nil
}

// receiveLog accepts one connection and checks it carries the whole log.
func receiveLog(l *Log, ln net.Listener) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	var off int64
	for len(got) > 0 {
		want, err := l.Read(off, 1)
		if err != nil || !bytes.HasPrefix(got, want) {
			return errors.New("received bytes differ from the log")
		}
		h, _ := batch.ParseHeader(want)
		off, got = h.NextOffset(), got[len(want):]
	}
	if off != l.HighWatermark() {
		return errors.New("short transfer")
	}
	return nil
}

func TestWait(t *testing.T) {
	l := mustOpen(t, testOptions(t, vfs.NewMem(), "/p"))
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background(), 0) }()
	select {
	case <-done:
		t.Fatal("Wait returned before any append")
	default:
	}
	mustAppend(t, l, mkBatch(t, 1, 1, 1))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- l.Wait(ctx, 5) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	go func() { done <- l.Wait(context.Background(), 5) }()
	l.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), mkBatch(t, 1, 1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := l.Read(0, 10); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func TestOffsetForTime(t *testing.T) {
	mfs := vfs.NewMem()
	o := testOptions(t, mfs, "/p")
	o.SegmentBytes, o.IndexIntervalBytes = 3000, 150
	l := mustOpen(t, o)
	type rec struct{ off, ts int64 }
	var all []rec
	ts := int64(1000)
	for i := range 120 {
		n := 1 + i%3
		if i%7 == 3 {
			ts -= 20 // out-of-order producer clocks
		}
		offs := mustAppend(t, l, mkBatch(t, n, 40, ts))
		for j := range n {
			all = append(all, rec{offs[0] + int64(j), ts + int64(j)})
		}
		ts += 10
	}
	brute := func(q int64) int64 {
		for _, r := range all {
			if r.ts >= q {
				return r.off
			}
		}
		return -1
	}
	check := func(l *Log, what string) {
		for q := int64(900); q < ts+20; q += 3 {
			got, err := l.OffsetForTime(q)
			if err != nil {
				t.Fatal(err)
			}
			// The log answers the first record with ts >= q *in a batch whose
			// max passed q*: with out-of-order timestamps that is a record at or
			// after the brute-force one.
			if want := brute(q); got != want && !(got > want && want >= 0) {
				t.Fatalf("%s: OffsetForTime(%d) = %d, want %d", what, q, got, want)
			}
		}
	}
	check(l, "open")
	l.Close()
	l = mustOpen(t, o)
	check(l, "reopened")
	for _, s := range l.segs[:len(l.segs)-1] {
		mfs.Remove(s.path(indexSuffix))
		mfs.Remove(s.path(timeIndexSuffix))
	}
	l.Close()
	l = mustOpen(t, o)
	defer l.Close()
	check(l, "indexes rebuilt")
	checkAllReadable(t, l)
}

func checkAllReadable(t *testing.T, l *Log) {
	t.Helper()
	for off := l.LogStartOffset(); off < l.HighWatermark(); off++ {
		b, err := l.Read(off, 1)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		h, _ := batch.ParseHeader(b)
		if off < h.BaseOffset || off > h.LastOffset() {
			t.Fatalf("Read(%d) returned batch [%d, %d]", off, h.BaseOffset, h.LastOffset())
		}
	}
}

func TestRollByAge(t *testing.T) {
	clk := newClock()
	o := testOptions(t, vfs.NewMem(), "/p")
	o.Now, o.SegmentAge = clk.Now, time.Hour
	l := mustOpen(t, o)
	defer l.Close()
	mustAppend(t, l, mkBatch(t, 1, 1, 1))
	clk.t = clk.t.Add(59 * time.Minute)
	mustAppend(t, l, mkBatch(t, 1, 1, 1))
	if len(l.segs) != 1 {
		t.Fatal("rolled too early")
	}
	clk.t = clk.t.Add(time.Minute)
	mustAppend(t, l, mkBatch(t, 1, 1, 1))
	if len(l.segs) != 2 || l.segs[1].base != 2 {
		t.Fatalf("%d segments", len(l.segs))
	}
}
