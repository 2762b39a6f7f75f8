package queue

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// Errors returned by Ack, Extend and Nack. All wrap one of these sentinels; a refused call
// changes nothing.
var (
	// ErrReceiptInvalid: the receipt is not one this package made (bad encoding or check).
	ErrReceiptInvalid = errors.New("queue: malformed receipt")
	// ErrReceiptStale: the message was delivered again since (the holder's lease is gone and
	// someone else may be working on it), or it is already finished (acked, dead-lettered,
	// expired, purged).
	ErrReceiptStale = errors.New("queue: stale receipt")
	// ErrNotInFlight: Extend on a current receipt whose visibility already ran out or that was
	// nacked. The message is visible again; extending would resurrect a lapsed lease.
	ErrNotInFlight = errors.New("queue: message not in flight")
	// ErrExtensionLimit is matched by *ExtensionLimitError.
	ErrExtensionLimit = errors.New("queue: extension limit")
	// ErrOutOfRange: a visibility, delay or extension argument is negative or too large.
	ErrOutOfRange = errors.New("queue: argument out of range")
)

// ExtensionLimitError: the requested deadline would hide the delivery for longer than
// Config.MaxExtension counted from its receive.
type ExtensionLimitError struct {
	Offset    int64
	Requested time.Duration // total hidden time the call asked for, from the receive
	Max       time.Duration
}

func (e *ExtensionLimitError) Error() string {
	return fmt.Sprintf("queue: extension of offset %d to %v exceeds the limit %v", e.Offset, e.Requested, e.Max)
}

// Is makes errors.Is(err, ErrExtensionLimit) true.
func (e *ExtensionLimitError) Is(target error) bool { return target == ErrExtensionLimit }

// Receipt is the parsed form of the opaque receipt string a Delivery carries. The token is the
// delivery's fencing token; only the latest delivery of a message has a current receipt.
type Receipt struct {
	Offset int64
	Token  uint64
}

// receiptVersion lets the encoding change later without misreading old receipts.
const receiptVersion = 1

const receiptRawLen = 1 + 8 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// receiptEncoding is URL-safe so the receipt travels in query strings and headers untouched;
// strict, so each receipt has exactly one spelling.
var receiptEncoding = base64.RawURLEncoding.Strict()

// String encodes the receipt: version, offset, token and a CRC-32C, base64url. The check makes
// a truncated or mistyped receipt fail as invalid instead of naming another message.
func (r Receipt) String() string {
	var b [receiptRawLen]byte
	b[0] = receiptVersion
	binary.BigEndian.PutUint64(b[1:], uint64(r.Offset))
	binary.BigEndian.PutUint64(b[9:], r.Token)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[:17], castagnoli))
	return receiptEncoding.EncodeToString(b[:])
}

// ParseReceipt decodes a receipt string. Any malformed input yields ErrReceiptInvalid.
func ParseReceipt(s string) (Receipt, error) {
	if receiptEncoding.EncodedLen(receiptRawLen) != len(s) {
		return Receipt{}, fmt.Errorf("%w: length %d", ErrReceiptInvalid, len(s))
	}
	var b [receiptRawLen]byte
	n, err := receiptEncoding.Decode(b[:], []byte(s))
	if err != nil || n != receiptRawLen {
		return Receipt{}, fmt.Errorf("%w: encoding", ErrReceiptInvalid)
	}
	if b[0] != receiptVersion {
		return Receipt{}, fmt.Errorf("%w: version %d", ErrReceiptInvalid, b[0])
	}
	if binary.BigEndian.Uint32(b[17:]) != crc32.Checksum(b[:17], castagnoli) {
		return Receipt{}, fmt.Errorf("%w: checksum", ErrReceiptInvalid)
	}
	r := Receipt{Offset: int64(binary.BigEndian.Uint64(b[1:])), Token: binary.BigEndian.Uint64(b[9:])}
	if r.Offset < 0 || r.Token == 0 {
		return Receipt{}, fmt.Errorf("%w: fields", ErrReceiptInvalid)
	}
	return r, nil
}
