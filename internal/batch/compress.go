package batch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompression is only for reading records (Records); batches are stored
// and served compressed, exactly as produced.
//
// Codecs: gzip (compress/gzip), snappy in both the raw block form and the
// xerial framing the Java client writes (klauspost/compress/s2 decodes
// snappy blocks), lz4 frames (pierrec/lz4/v4), zstd (klauspost/compress/zstd).

// maxInflate bounds decompressed records so a small hostile batch cannot
// exhaust memory.
const maxInflate = 64 << 20

func decompress(c Compression, p []byte) ([]byte, error) {
	var out []byte
	var err error
	switch c {
	case CompressionGzip:
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(p)); err == nil {
			out, err = readLimited(zr)
		}
	case CompressionSnappy:
		out, err = unsnappy(p)
	case CompressionLZ4:
		out, err = readLimited(lz4.NewReader(bytes.NewReader(p)))
	case CompressionZstd:
		out, err = unzstd(p)
	default:
		return nil, &Error{Reason: fmt.Sprintf("codec %d", c), Err: ErrCompressed}
	}
	if err != nil {
		if e, ok := err.(*Error); ok {
			return nil, e
		}
		return nil, corrupt("codec %d: %v", c, err)
	}
	return out, nil
}

func readLimited(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxInflate+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxInflate {
		return nil, tooBig()
	}
	return out, nil
}

func tooBig() error {
	return &Error{Reason: "records inflate past 64 MiB", Err: ErrTooLarge}
}

// xerialMagic starts snappy data framed by the Java client (snappy-java).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func unsnappy(p []byte) ([]byte, error) {
	if !bytes.HasPrefix(p, xerialMagic) {
		return snappyBlock(nil, p)
	}
	if len(p) < 16 {
		return nil, fmt.Errorf("xerial header truncated")
	}
	p = p[16:] // magic, version, compatible version
	var out []byte
	for len(p) > 0 {
		if len(p) < 4 {
			return nil, fmt.Errorf("xerial chunk length truncated")
		}
		n := binary.BigEndian.Uint32(p)
		if uint64(n) > uint64(len(p)-4) {
			return nil, fmt.Errorf("xerial chunk of %d bytes, %d left", n, len(p)-4)
		}
		var err error
		if out, err = snappyBlock(out, p[4:4+n]); err != nil {
			return nil, err
		}
		p = p[4+n:]
	}
	return out, nil
}

// snappyBlock appends the decoding of one snappy block to out.
func snappyBlock(out, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > maxInflate-len(out) {
		return nil, tooBig()
	}
	dec, err := s2.Decode(make([]byte, n), block)
	if err != nil {
		return nil, err
	}
	return append(out, dec...), nil
}

// zstdDecoder is shared: DecodeAll is safe for concurrent use and, with no
// stream attached, the decoder runs no goroutines.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxInflate), zstd.WithDecoderConcurrency(2))
})

func unzstd(p []byte) ([]byte, error) {
	d, err := zstdDecoder()
	if err != nil {
		return nil, err
	}
	return d.DecodeAll(p, nil)
}
