package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// reqHeader is a Kafka request header (v1, or v2 for flexible versions).
type reqHeader struct {
	key      int16
	version  int16
	corrID   int32
	clientID *string // nullable
}

// minHeaderSize is a v1 header with a null client id: key, version,
// correlation id, client id length.
const minHeaderSize = 2 + 2 + 4 + 2

var (
	// errMalformed closes the connection: Kafka does the same for a frame it
	// cannot parse, and the client reconnects.
	errMalformed = errors.New("malformed request")
	// errUnsupportedVersion: ApiVersions answers it; other APIs close the
	// connection as Kafka does.
	errUnsupportedVersion = errors.New("unsupported version")
)

// decodeRequest parses a frame (without its size prefix): the header, then
// the body with kmsg at the header's version. The header is returned even
// on error, as far as it was read, so the caller can answer ApiVersions.
func decodeRequest(frame []byte) (reqHeader, kmsg.Request, error) {
	var h reqHeader
	if len(frame) < minHeaderSize {
		return h, nil, fmt.Errorf("%w: %d-byte header", errMalformed, len(frame))
	}
	h.key = int16(binary.BigEndian.Uint16(frame))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corrID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[8:]
	cid, rest, ok := readNullableString(rest)
	if !ok {
		return h, nil, fmt.Errorf("%w: client id", errMalformed)
	}
	h.clientID = cid
	api, known := apis[h.key]
	req := kmsg.RequestForKey(h.key)
	if !known || req == nil {
		return h, nil, fmt.Errorf("%w: unknown api key %d", errMalformed, h.key)
	}
	if h.version < api.min || h.version > api.max {
		return h, nil, fmt.Errorf("%w: %s v%d (we serve v%d to v%d)", errUnsupportedVersion,
			kmsg.NameForKey(h.key), h.version, api.min, api.max)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if rest, ok = skipTags(rest); !ok {
			return h, nil, fmt.Errorf("%w: header tags", errMalformed)
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d body: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// readNullableString reads an int16-length string; length -1 is null.
func readNullableString(b []byte) (*string, []byte, bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	switch {
	case n == -1:
		return nil, b, true
	case n < -1 || int(n) > len(b):
		return nil, nil, false
	}
	s := string(b[:n])
	return &s, b[n:], true
}

// skipTags skips a tagged-field section: a count, then per field a tag, a
// size and that many bytes (all unsigned varints).
func skipTags(b []byte) ([]byte, bool) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, false
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, false
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, false
		}
		b = b[n+int(size):]
	}
	return b, true
}
