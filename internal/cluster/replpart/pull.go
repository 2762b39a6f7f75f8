package replpart

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The pull exchange: a replica whose local log is behind a snapshot's checkpoint asks a
// peer's Machine (multiraft.Host.Request, answered by Machine.ServeRequest) for the
// records between, a chunk at a time.
//
//	request:  version(1)=1 | kind(1)=1 (pull) | from(uvarint) | to(uvarint) | max(uvarint)
//	response: version(1)=1 | start(uvarint) | next(uvarint) | data (the rest)
//
// from..to is the range of offsets wanted, max the most bytes of data to answer with (at
// least one batch is sent whatever max says). start is where data begins: above from when
// the source's log starts above it (retention deleted the records), up to to; next is the
// offset after data's last record. data is whole batches in the Log's own format, opaque
// to this package.

const (
	pullVersion = 1
	pullKind    = 1

	// MaxPullChunk bounds max in a request: what one answer may hold (and so what a
	// pulling replica holds in memory at once).
	MaxPullChunk = 8 << 20
)

// ErrBadPull is a pull request or response that is not well formed.
var ErrBadPull = errors.New("replpart: malformed pull message")

// pullRequest asks for offsets [From, To), at most Max bytes of data.
type pullRequest struct {
	From, To int64
	Max      int
}

func (r pullRequest) encode() []byte {
	b := []byte{pullVersion, pullKind}
	b = binary.AppendUvarint(b, uint64(r.From))
	b = binary.AppendUvarint(b, uint64(r.To))
	return binary.AppendUvarint(b, uint64(r.Max))
}

func decodePullRequest(b []byte) (pullRequest, error) {
	var r pullRequest
	if len(b) < 2 || b[0] != pullVersion || b[1] != pullKind {
		return r, fmt.Errorf("%w: header", ErrBadPull)
	}
	v, err := uvarints(b[2:], 3, ErrBadPull)
	if err != nil {
		return r, err
	}
	if v[0] > math.MaxInt64 || v[1] > math.MaxInt64 || v[0] >= v[1] {
		return r, fmt.Errorf("%w: range %d..%d", ErrBadPull, v[0], v[1])
	}
	if v[2] == 0 || v[2] > MaxPullChunk {
		return r, fmt.Errorf("%w: max %d bytes (1..%d)", ErrBadPull, v[2], MaxPullChunk)
	}
	return pullRequest{From: int64(v[0]), To: int64(v[1]), Max: int(v[2])}, nil
}

// Range is a run of a local log's records, as one replica hands them to another.
type Range struct {
	Start int64  // offset of Data's first record (or where the source's log starts, if Data is empty)
	Next  int64  // offset after Data's last record (Start when Data is empty)
	Data  []byte // whole batches, in the Log's own format
}

func (r Range) encode() []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(r.Data))
	b = append(b, pullVersion)
	b = binary.AppendUvarint(b, uint64(r.Start))
	b = binary.AppendUvarint(b, uint64(r.Next))
	return append(b, r.Data...)
}

// decodeRange parses a response; Data aliases b. Only the form is checked here: whether
// the range answers the request is the puller's check (checkRange).
func decodeRange(b []byte) (Range, error) {
	var r Range
	if len(b) < 1 || b[0] != pullVersion {
		return r, fmt.Errorf("%w: header", ErrBadPull)
	}
	b = b[1:]
	var v [2]uint64
	for i := range v {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return r, fmt.Errorf("%w: field %d", ErrBadPull, i)
		}
		v[i], b = x, b[n:]
	}
	if v[0] > math.MaxInt64 || v[1] > math.MaxInt64 || v[1] < v[0] {
		return r, fmt.Errorf("%w: range %d..%d", ErrBadPull, v[0], v[1])
	}
	if (v[1] > v[0]) != (len(b) > 0) {
		return r, fmt.Errorf("%w: %d bytes for offsets %d..%d", ErrBadPull, len(b), v[0], v[1])
	}
	return Range{Start: int64(v[0]), Next: int64(v[1]), Data: b}, nil
}

// checkRange: r answers req (it starts at or after From, ends by To, and moves the puller
// on: records, or a start above From).
func checkRange(req pullRequest, r Range) error {
	switch {
	case r.Start < req.From || r.Next > req.To:
		return fmt.Errorf("%w: answered offsets %d..%d for %d..%d", ErrBadPull, r.Start, r.Next, req.From, req.To)
	case r.Next <= req.From:
		return fmt.Errorf("%w: no records at offset %d", ErrBadPull, req.From)
	}
	return nil
}
