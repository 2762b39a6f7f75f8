package storage

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/testrace"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// The flip tests damage one byte of a log at rest and check that it costs
// that batch and nothing else.

// placed is where a batch of the flip fixture lies.
type placed struct {
	seg        string // segment file
	pos        int64  // byte position in it
	base, last int64  // offsets
	bytes      []byte // as stored
	lastOfSeg  bool
	activeSeg  bool
}

// flipFixture builds a log of two segments (one sealed, one active) of
// batches of 1-3 records, with index entries every 200 bytes, and returns
// the durable state after a clean Close (crash=false) or after a power cut
// with everything acknowledged (crash=true: the active segment's index
// files, never synced, are lost), with where each batch lies.
func flipFixture(t *testing.T, crash bool) (*vfs.MemFS, Options, []placed) {
	t.Helper()
	mfs := vfs.NewMem()
	o := testOptions(t, mfs, "/p")
	o.IndexIntervalBytes = 200
	o.SegmentBytes = 1400
	l := mustOpen(t, o)
	for i := range 14 {
		mustAppend(t, l, mkBatch(t, 1+i%3, 20+7*i%40, 1_000_000+int64(100*i)))
	}
	if len(l.segs) != 2 {
		t.Fatalf("fixture has %d segments", len(l.segs))
	}
	state := mfs.CrashClone()
	l.Close()
	if !crash {
		state = mfs.CrashClone()
	}
	names, _ := state.List("/p")
	var out []placed
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, logSuffix) {
			segs = append(segs, n)
		}
	}
	for si, n := range segs {
		data := readFile(t, state, filepath.Join("/p", n))
		for pos := int64(0); pos < int64(len(data)); {
			h, err := batch.ParseHeader(data[pos:])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, placed{seg: filepath.Join("/p", n), pos: pos, base: h.BaseOffset, last: h.LastOffset(),
				bytes: data[pos : pos+h.Size()], activeSeg: si == len(segs)-1})
			pos += h.Size()
		}
		out[len(out)-1].lastOfSeg = true
	}
	return state, o, out
}

// readThrough reads the whole log from its start, stepping over gaps, and
// returns the batches by base offset.
func readThrough(t *testing.T, l *Log) map[int64][]byte {
	t.Helper()
	got := map[int64][]byte{}
	off := l.LogStartOffset()
	for i := 0; off < l.HighWatermark(); i++ {
		if i > 10_000 {
			t.Fatal("read loop does not advance")
		}
		b, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			break // a quarantined range up to the high watermark
		}
		for len(b) > 0 {
			h, _ := batch.ParseHeader(b)
			if h.BaseOffset < off {
				t.Fatalf("Read(%d) returned a batch at %d", off, h.BaseOffset)
			}
			got[h.BaseOffset] = bytes.Clone(b[:h.Size()])
			off, b = h.NextOffset(), b[h.Size():]
		}
	}
	return got
}

// kindOf names the field of a batch that byte i falls in.
func kindOf(i, size int64) string {
	switch {
	case i < 8:
		return "baseOffset"
	case i < 12:
		return "length"
	case i < 16:
		return "leaderEpoch"
	case i == 16:
		return "magic"
	case i < 21:
		return "crc"
	case i < batch.HeaderSize:
		return "header"
	case i == size-1:
		return "lastByte"
	default:
		return "records"
	}
}

// TestFlipEveryByteOfSegments flips, one at a time, every byte of both
// segments of a log at rest, after a clean close and after a power cut, and
// reopens it: the batch hit is quarantined (listed with its offsets,
// counted) and skipped, every other batch reads back byte for byte, the
// list survives a restart, and nothing panics. Two cases are told apart
// and asserted as such: the leader epoch lies outside the CRC (Kafka's
// format) so a flip there is served as is, and after a power cut damage in
// the last batch of the active segment cannot be told from a write cut
// short and is cut off as a torn tail.
func TestFlipEveryByteOfSegments(t *testing.T) {
	testrace.NotUnderRace(t)
	for _, crash := range []bool{false, true} {
		state, o, layout := flipFixture(t, crash)
		// Every byte of every header and every last byte; record bytes,
		// which all fail the same way (the CRC), every few bytes.
		stride := int64(3)
		if testing.Short() {
			stride = 17
		}
		kinds := map[string]int{}
		var fig flipFigures
		for k, b := range layout {
			size := int64(len(b.bytes))
			for i := int64(0); i < size; i++ {
				if i >= batch.HeaderSize && i < size-1 && (i-batch.HeaderSize)%stride != 0 {
					continue
				}
				kind := kindOf(i, size)
				kinds[kind]++
				name := fmt.Sprintf("crash=%v/batch%d/%s/byte%d", crash, k, kind, i)
				fig.add(checkFlip(t, name, state, o, layout, k, i, crash), b)
			}
		}
		for _, want := range []string{"baseOffset", "length", "leaderEpoch", "magic", "crc", "header", "records", "lastByte"} {
			if kinds[want] == 0 {
				t.Fatalf("no flip of kind %s", want)
			}
		}
		t.Logf("crash=%v: %d bytes flipped, one at a time, in %d batches: %d quarantined, %d cut as a torn tail, "+
			"%d undetectable (leader epoch, served as stored); records lost per flip at most %d (the batch hit); "+
			"the other %d batches read back intact after every flip",
			crash, fig.flips, len(layout), fig.quarantined, fig.torn, fig.epoch, fig.maxLost, len(layout)-1)
	}
}

// flipOutcome is what one flip cost.
type flipOutcome int

const (
	flipQuarantined flipOutcome = iota
	flipTorn
	flipEpoch
)

// flipFigures sums the outcomes of a flip test, for its report.
type flipFigures struct {
	flips, quarantined, torn, epoch int
	maxLost                         int64
}

func (f *flipFigures) add(o flipOutcome, hit placed) {
	f.flips++
	lost := hit.last - hit.base + 1
	switch o {
	case flipQuarantined:
		f.quarantined++
	case flipTorn:
		f.torn++
	case flipEpoch:
		f.epoch++
		lost = 0
	}
	f.maxLost = max(f.maxLost, lost)
}

func checkFlip(t *testing.T, name string, state *vfs.MemFS, o Options, layout []placed, k int, i int64, crash bool) flipOutcome {
	t.Helper()
	hit := layout[k]
	fs := state.CrashClone()
	data := readFile(t, fs, hit.seg)
	data[hit.pos+i] ^= 0xff
	writeFile(t, fs, hit.seg, data)
	o.FS = fs
	o.Files = NewFileCache(FileCacheOptions{ScrubBytesPerSec: -1})
	l, err := Open(o)
	if err != nil {
		t.Fatalf("%s: Open: %v", name, err)
	}
	got := readThrough(t, l)
	kind := kindOf(i, int64(len(hit.bytes)))
	torn := crash && hit.activeSeg && hit.lastOfSeg && kind != "leaderEpoch"
	for j, b := range layout {
		switch {
		case j == k && kind == "leaderEpoch":
			want := bytes.Clone(b.bytes)
			want[i] ^= 0xff
			if !bytes.Equal(got[b.base], want) {
				t.Fatalf("%s: batch %d with a flipped epoch not served as stored", name, b.base)
			}
		case j == k:
			if got[b.base] != nil {
				t.Fatalf("%s: damaged batch %d served", name, b.base)
			}
		case !bytes.Equal(got[b.base], b.bytes):
			t.Fatalf("%s: batch %d lost or changed (%d bytes read)", name, b.base, len(got[b.base]))
		}
	}
	q := l.Quarantined()
	switch {
	case kind == "leaderEpoch" || torn:
		if len(q) != 0 {
			t.Fatalf("%s: quarantined %+v", name, q)
		}
		want := layout[len(layout)-1].last + 1
		if torn {
			want = hit.base
		}
		if l.HighWatermark() != want {
			t.Fatalf("%s: hw %d, want %d (torn tail %v)", name, l.HighWatermark(), want, torn)
		}
	default:
		if len(q) != 1 || q[0].Segment != hit.seg || q[0].Position != hit.pos || q[0].Length != int64(len(hit.bytes)) ||
			q[0].FirstOffset != hit.base || q[0].LastOffset != hit.last {
			t.Fatalf("%s: quarantined %+v, want %s at %d, offsets %d-%d", name, q, hit.seg, hit.pos, hit.base, hit.last)
		}
		if n := o.Files.Stats().CorruptBatches; n != 1 {
			t.Fatalf("%s: %d corrupt batches counted", name, n)
		}
		if l.HighWatermark() != layout[len(layout)-1].last+1 {
			t.Fatalf("%s: hw %d", name, l.HighWatermark())
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("%s: Close: %v", name, err)
	}
	// A restart keeps the list, and still skips the batch.
	l, err = Open(o)
	if err != nil {
		t.Fatalf("%s: reopen: %v", name, err)
	}
	defer l.Close()
	if q2 := l.Quarantined(); len(q2) != len(q) {
		t.Fatalf("%s: after a restart quarantined %+v, before %+v", name, q2, q)
	}
	if again := readThrough(t, l); len(again) != len(got) {
		t.Fatalf("%s: after a restart %d batches, before %d", name, len(again), len(got))
	}
	switch {
	case kind == "leaderEpoch":
		return flipEpoch
	case torn:
		return flipTorn
	}
	return flipQuarantined
}

// TestFlipEveryByteOfIndexes flips, one at a time, every byte of the index
// files of a cleanly closed log: indexes are never trusted, so every batch
// still reads back, seeks by time still answer right, nothing is
// quarantined.
func TestFlipEveryByteOfIndexes(t *testing.T) {
	state, o, layout := flipFixture(t, false)
	names, _ := state.List("/p")
	flips := 0
	defer func() {
		t.Logf("%d bytes of index files flipped, one at a time: no batch lost, none quarantined, every seek by time right", flips)
	}()
	for _, n := range names {
		if !strings.HasSuffix(n, indexSuffix) && !strings.HasSuffix(n, timeIndexSuffix) {
			continue
		}
		path := filepath.Join("/p", n)
		size := int64(len(readFile(t, state, path)))
		if size == 0 {
			t.Fatalf("%s is empty", n)
		}
		for i := range size {
			flips++
			name := fmt.Sprintf("%s/byte%d", n, i)
			fs := state.CrashClone()
			data := readFile(t, fs, path)
			data[i] ^= 0xff
			writeFile(t, fs, path, data)
			o.FS = fs
			o.Files = NewFileCache(FileCacheOptions{ScrubBytesPerSec: -1})
			l, err := Open(o)
			if err != nil {
				t.Fatalf("%s: Open: %v", name, err)
			}
			got := readThrough(t, l)
			for _, b := range layout {
				if !bytes.Equal(got[b.base], b.bytes) {
					t.Fatalf("%s: batch %d lost or changed", name, b.base)
				}
				h, _ := batch.ParseHeader(b.bytes)
				if off, err := l.OffsetForTime(h.BaseTimestamp); err != nil || off != b.base {
					t.Fatalf("%s: OffsetForTime(%d) = %d, %v; want %d", name, h.BaseTimestamp, off, err, b.base)
				}
			}
			if q := l.Quarantined(); len(q) != 0 {
				t.Fatalf("%s: quarantined %+v", name, q)
			}
			l.Close()
		}
	}
}

// TestDamagedQuarantineList: a quarantine list whose bytes are damaged is
// not trusted (a wrong range would hide good batches); the damage it named
// is found again when read, and listed again.
func TestDamagedQuarantineList(t *testing.T) {
	state, o, layout := flipFixture(t, false)
	hit := layout[2]
	data := readFile(t, state, hit.seg)
	data[hit.pos+30] ^= 0xff
	writeFile(t, state, hit.seg, data)
	o.FS = state
	l := mustOpen(t, o)
	readThrough(t, l)
	l.Close()
	qpath := filepath.Join("/p", quarantineFile)
	list := readFile(t, state, qpath)
	for i := range list {
		fs := state.CrashClone()
		bad := bytes.Clone(list)
		bad[i] ^= 0x01
		writeFile(t, fs, qpath, bad)
		o.FS = fs
		l := mustOpen(t, o)
		got := readThrough(t, l)
		q := l.Quarantined()
		if len(q) != 1 || q[0].FirstOffset != hit.base || got[hit.base] != nil {
			t.Fatalf("byte %d of the list: quarantined %+v", i, q)
		}
		for _, b := range layout {
			if b.base != hit.base && !bytes.Equal(got[b.base], b.bytes) {
				t.Fatalf("byte %d of the list: batch %d lost", i, b.base)
			}
		}
		l.Close()
	}
}

// TestScrubFindsDamage: the scrub finds damage in a sealed segment nobody
// has read, and the background scrub does it alone.
func TestScrubFindsDamage(t *testing.T) {
	state, o, layout := flipFixture(t, false)
	hit := layout[1]
	data := readFile(t, state, hit.seg)
	data[hit.pos+40] ^= 0xff
	writeFile(t, state, hit.seg, data)
	o.FS = state
	o.Files = NewFileCache(FileCacheOptions{ScrubBytesPerSec: -1})
	l := mustOpen(t, o)
	if q := l.Quarantined(); len(q) != 0 {
		t.Fatalf("found before anything read it: %+v", q)
	}
	if err := l.Scrub(t.Context()); err != nil {
		t.Fatal(err)
	}
	if q := l.Quarantined(); len(q) != 1 || q[0].FirstOffset != hit.base {
		t.Fatalf("after Scrub: %+v", q)
	}
	l.Close()

	fs := state.CrashClone()
	fs.Remove(filepath.Join("/p", quarantineFile))
	o.FS = fs
	o.Files = NewFileCache(FileCacheOptions{ScrubBytesPerSec: 1 << 30})
	l = mustOpen(t, o)
	defer l.Close()
	waitFor(t, func() bool { return len(l.Quarantined()) == 1 })
}

// waitFor polls cond, for what a background goroutine does, for at most
// ten seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// oneSegmentWithFlip writes ten batches to one segment with index entries
// every interval bytes, closes the log, flips the byte at offset at of
// batch 5, and reopens it. It returns the log and the batches as stored.
func oneSegmentWithFlip(t *testing.T, interval, at int) (*Log, [][]byte) {
	t.Helper()
	mfs := vfs.NewMem()
	o := testOptions(t, mfs, "/p")
	o.IndexIntervalBytes = interval
	l := mustOpen(t, o)
	for i := range 10 {
		mustAppend(t, l, mkBatch(t, 1, 50+i, int64(i)))
	}
	stored := readAllBatches(t, l, 0)
	path := l.active.path(logSuffix)
	l.Close()
	pos := 0
	for _, b := range stored[:5] {
		pos += len(b)
	}
	data := readFile(t, mfs, path)
	data[pos+at] ^= 0xff
	writeFile(t, mfs, path, data)
	return mustOpen(t, o), stored
}

// TestSectionNeverServesDamage: a byte flipped in a batch of the active
// segment of a cleanly closed log. ReadSection, the Kafka sendfile path,
// used to hand the damaged batch to the consumer (which then failed its CRC
// check on that partition for good); now every section holds only batches
// that pass their CRC, and the damaged one is skipped.
func TestSectionNeverServesDamage(t *testing.T) {
	// Recovery starts from the last index entry, after batch 5: only a
	// read can find the damage.
	l, stored := oneSegmentWithFlip(t, 200, 70) // a record byte of batch 5
	defer l.Close()
	for off := int64(0); off < 10; off++ {
		sec, err := l.ReadSection(off, 1<<20)
		if err != nil {
			t.Fatalf("ReadSection(%d): %v", off, err)
		}
		if sec.Length == 0 {
			t.Fatalf("ReadSection(%d) is empty", off)
		}
		buf := make([]byte, sec.Length)
		if _, err := sec.File.ReadAt(buf, sec.Position); err != nil {
			t.Fatal(err)
		}
		for len(buf) > 0 {
			n, _ := batch.FrameSize(buf)
			if err := batch.Validate(buf[:n], 0); err != nil {
				t.Fatalf("ReadSection(%d) served a damaged batch: %v", off, err)
			}
			buf = buf[n:]
		}
	}
	got := readThrough(t, l)
	for i, b := range stored {
		if i != 5 && !bytes.Equal(got[int64(i)], b) {
			t.Fatalf("batch %d lost", i)
		}
	}
}

// TestHeaderFlipCostsOneBatch: a byte flipped in the length field of a
// batch in the middle of the active segment of a cleanly closed log.
// Recovery used to take it for a torn tail and cut the segment there,
// losing every acknowledged batch after it with only a warning; now it
// costs that batch alone.
func TestHeaderFlipCostsOneBatch(t *testing.T) {
	l, stored := oneSegmentWithFlip(t, 1<<20, 10) // a byte of batchLength; recovery scans it all
	defer l.Close()
	if l.HighWatermark() != 10 {
		t.Fatalf("high watermark %d after the flip, want 10", l.HighWatermark())
	}
	got := readThrough(t, l)
	for i, b := range stored {
		if i != 5 && !bytes.Equal(got[int64(i)], b) {
			t.Fatalf("batch %d lost", i)
		}
	}
	if got[5] != nil {
		t.Fatal("the damaged batch was served")
	}
}

// TestReadsNeverQuarantineGoodBatches reads an undamaged log of batches of
// many sizes at every offset with every kind of read and many read sizes,
// before and after a restart (when nothing of it is checked yet): nothing
// may be taken for damage.
func TestReadsNeverQuarantineGoodBatches(t *testing.T) {
	mfs := vfs.NewMem()
	o := testOptions(t, mfs, "/p")
	o.SegmentBytes, o.IndexIntervalBytes = 2000, 150
	l := mustOpen(t, o)
	var sizes []int
	for i := range 60 {
		b := mkBatch(t, 1+i%4, (i*37)%200, int64(i))
		sizes = append(sizes, len(b))
		mustAppend(t, l, b)
	}
	hw := l.HighWatermark()
	for round := range 2 {
		for off := int64(0); off < hw; off++ {
			for _, max := range []int{1, 11, 12, 13, 60, 61, 62, sizes[off%60] + 3, 700, 1 << 20} {
				if _, err := l.Read(off, max); err != nil {
					t.Fatalf("round %d Read(%d, %d): %v", round, off, max, err)
				}
				s, err := l.ReadSection(off, max)
				if err != nil {
					t.Fatalf("round %d ReadSection(%d, %d): %v", round, off, max, err)
				}
				if _, err := s.WriteTo(io.Discard); err != nil {
					t.Fatal(err)
				}
				if _, err := l.HeaderAt(off); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := l.OffsetForTime(0); err != nil {
			t.Fatal(err)
		}
		if q := l.Quarantined(); len(q) != 0 {
			t.Fatalf("round %d: good batches quarantined: %+v", round, q)
		}
		l.Close()
		l = mustOpen(t, o)
	}
	if err := l.Scrub(t.Context()); err != nil {
		t.Fatal(err)
	}
	if q := l.Quarantined(); len(q) != 0 {
		t.Fatalf("scrub quarantined good batches: %+v", q)
	}
	l.Close()
}

// TestIdleReopenWritesNothing: a log opened after a clean close and closed
// again with nothing appended syncs nothing and leaves its index files as
// they were (a broker with 100,000 idle queues restarts without 400,000
// fdatasyncs); appends after such an open, then a clean close or a power
// cut, leave indexes that recovery and reads trust.
func TestIdleReopenWritesNothing(t *testing.T) {
	mfs := vfs.NewMem()
	cfs := vfs.NewCountingFS(mfs)
	o := testOptions(t, cfs, "/p")
	o.SegmentBytes, o.IndexIntervalBytes = 1000, 150
	l := mustOpen(t, o)
	var sent [][]byte
	appendSome := func(n int) {
		for i := range n {
			b := mkBatch(t, 1+i%3, 40, int64(1000*len(sent)))
			sent = append(sent, b)
			mustAppend(t, l, b)
		}
	}
	appendSome(20)
	l.Close()
	names, _ := mfs.List("/p")
	before := map[string][]byte{}
	for _, n := range names {
		before[n] = readFile(t, mfs, filepath.Join("/p", n))
	}
	syncs := cfs.Syncs()
	l = mustOpen(t, o)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := cfs.Syncs() - syncs; n != 0 {
		t.Fatalf("an idle open and close synced %d times", n)
	}
	for n, b := range before {
		if !bytes.Equal(readFile(t, mfs, filepath.Join("/p", n)), b) {
			t.Fatalf("%s changed by an idle open and close", n)
		}
	}
	check := func(what string) {
		t.Helper()
		got := readAllBatches(t, l, 0)
		if len(got) != len(sent) {
			t.Fatalf("%s: %d batches, want %d", what, len(got), len(sent))
		}
		off := int64(0)
		for i, b := range got {
			h, _ := batch.ParseHeader(b)
			if !sameBatch(b, sent[i], off) {
				t.Fatalf("%s: batch %d differs", what, i)
			}
			if at, err := l.OffsetForTime(h.BaseTimestamp); err != nil || at != off {
				t.Fatalf("%s: OffsetForTime(%d) = %d, %v; want %d", what, h.BaseTimestamp, at, err, off)
			}
			off = h.NextOffset()
		}
	}
	l = mustOpen(t, o)
	appendSome(3)
	l.Close()
	l = mustOpen(t, o)
	check("appends after an idle open, then a clean close")
	appendSome(7)
	o.FS = mfs.CrashClone() // a power cut: the index writes since the open are lost
	l.Close()
	l = mustOpen(t, o)
	defer l.Close()
	check("appends after an idle open, then a power cut")
}

// TestAppendAfterCleanReopenDropsTheSeal: a clean close records where the
// data ends, and recovery takes what lies past that end for a torn tail.
// After an idle reopen the first append must remove the record before it
// is acknowledged: here two batches appended after the reopen, a power
// cut, and damage in the first of them. A stale record would make recovery
// cut both; without it the damaged one is quarantined and the other kept.
func TestAppendAfterCleanReopenDropsTheSeal(t *testing.T) {
	mfs := vfs.NewMem()
	o := testOptions(t, mfs, "/p")
	l := mustOpen(t, o)
	for i := range 5 {
		mustAppend(t, l, mkBatch(t, 1, 40, int64(i)))
	}
	l.Close()
	l = mustOpen(t, o)
	mustAppend(t, l, mkBatch(t, 1, 40, 5)) // acknowledged, so durable
	last := mkBatch(t, 1, 40, 6)
	mustAppend(t, l, last)
	state := mfs.CrashClone()
	l.Close()
	path := filepath.Join("/p", segmentName(0, logSuffix))
	data := readFile(t, state, path)
	size := len(last)
	data[5*size+30] ^= 0xff // the first batch appended after the reopen
	writeFile(t, state, path, data)
	o.FS = state
	l = mustOpen(t, o)
	defer l.Close()
	got := readThrough(t, l)
	if !sameBatch(got[6], last, 6) || got[5] != nil || l.HighWatermark() != 7 {
		t.Fatalf("after recovery: hw %d, batch 6 kept %v, damaged batch 5 served %v",
			l.HighWatermark(), got[6] != nil, got[5] != nil)
	}
}
