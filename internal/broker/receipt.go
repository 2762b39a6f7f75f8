package broker

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"math"
	"strings"
	"sync"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Receipts as the broker hands them out. The cursor's receipt (package
// queue: offset and fencing token) fences deliveries of one message; it
// says nothing of which queue it came from, and the same message index of
// two queues had the same receipt. The broker wraps it in a receipt bound
// to the queue's (or subscription's) catalog id and authenticated with the
// data directory's key, so a receipt of one queue is refused by another,
// a queue deleted and created again under its name refuses the old one's
// (ids are never reused), and none can be forged or guessed:
//
//	base64url(raw, no padding) of
//	raw = 0x02 | uvarint partition | uvarint offset | uvarint token | mac
//	mac = HMAC-SHA256(key, "sluice receipt\x00" | kind | id (8 bytes, big-endian) | raw without mac)[:16]
//
// kind is 'q' for a queue and 's' for a subscription. Offset and token are
// not secret (a delivery carries both as Sequence and FencingToken), so the
// receipt is authenticated, not encrypted. 16 bytes of MAC (128 bits) make
// a forgery as likely as guessing a random 128-bit key; a receipt is about
// 32 characters, URL-safe.
//
// A receipt of the first format (version byte 1, made by the cursor
// alone, "<partition>:" before it for a subscription) is refused as stale:
// see errReceiptLegacy.

// receiptKeyFile holds the data directory's receipt key, written as the
// catalog's files are (checksummed, crash-atomic, a copy beside it).
const receiptKeyFile = "receipt-key.json"

const (
	receiptFormat  = 2  // first byte of a receipt; the cursor's own are 1
	receiptKeyLen  = 32 // HMAC-SHA256's block-size-friendly key
	receiptMACLen  = 16
	receiptMaxRaw  = 1 + 3*binary.MaxVarintLen64 + receiptMACLen
	receiptMinRaw  = 1 + 3 + receiptMACLen
	receiptDomain  = "sluice receipt\x00"
	receiptOfQueue = 'q'
	receiptOfSub   = 's'
)

// errReceiptLegacy refuses a receipt of the first format, handed out
// before an upgrade. It is stale (the same answer as a receipt whose
// delivery is over): accepting it would keep the unbound receipts usable
// on every queue, and refusing costs at most a duplicate, the message
// being delivered again when its visibility timeout ends.
var errReceiptLegacy = fmt.Errorf("%w: issued before receipts were bound to their queue (an upgrade); the message is delivered again when its visibility timeout ends", ErrReceiptStale)

var receiptEncoding = base64.RawURLEncoding.Strict()

// receiptKey authenticates the receipts of one data directory.
type receiptKey struct {
	raw  []byte    // the key, to tell whether a cluster's changed (it never does)
	macs sync.Pool // of *receiptMAC under the key
}

// receiptMAC is an HMAC-SHA256 under the key with room for its input and
// output, so that making or checking a receipt allocates nothing but the
// receipt (what goes through the hash.Hash interface would escape).
type receiptMAC struct {
	h   hash.Hash
	in  [len(receiptDomain) + 1 + 8 + receiptMaxRaw]byte
	sum [sha256.Size]byte
}

func newReceiptKey(key []byte) *receiptKey {
	k := append([]byte(nil), key...)
	return &receiptKey{raw: k, macs: sync.Pool{New: func() any { return &receiptMAC{h: hmac.New(sha256.New, k)} }}}
}

// loadReceiptKey reads the data directory's receipt key, making it the
// first time. A key damaged in both copies is replaced (logged): receipts
// handed out before are then refused as invalid and their messages
// delivered again, which loses nothing.
func loadReceiptKey(fsys vfs.FS, dir string, log *slog.Logger) (*receiptKey, error) {
	var f struct {
		Key []byte `json:"key"` // base64 in JSON
	}
	found, err := readSettings(fsys, dir, receiptKeyFile, &f)
	switch {
	case err != nil:
		log.Error("receipt key damaged in both copies; making a new one: receipts handed out before it are refused and their messages delivered again", "err", err)
	case found && len(f.Key) == receiptKeyLen:
		return newReceiptKey(f.Key), nil
	case found:
		log.Error("receipt key has the wrong length; making a new one: receipts handed out before it are refused and their messages delivered again", "bytes", len(f.Key))
	}
	f.Key = make([]byte, receiptKeyLen)
	if _, err := rand.Read(f.Key); err != nil {
		return nil, fmt.Errorf("broker: receipt key: %w", err)
	}
	// Made before any receipt is handed out (Open has not returned), so a
	// crash before it is durable leaves nothing that needed it.
	if err := writeSettings(fsys, dir, receiptKeyFile, f); err != nil {
		return nil, fmt.Errorf("broker: receipt key: %w", err)
	}
	return newReceiptKey(f.Key), nil
}

// mac appends the receipt's MAC over body (at most receiptMaxRaw bytes)
// for the entity kind/id.
func (k *receiptKey) mac(dst []byte, kind byte, id uint64, body []byte) []byte {
	m := k.macs.Get().(*receiptMAC)
	in := append(m.in[:0], receiptDomain...)
	in = append(in, kind)
	in = binary.BigEndian.AppendUint64(in, id)
	in = append(in, body...)
	m.h.Reset()
	m.h.Write(in)
	dst = append(dst, m.h.Sum(m.sum[:0])[:receiptMACLen]...)
	k.macs.Put(m)
	return dst
}

// receiptBinding is what a cursor set's receipts are bound to: the data
// directory's key and the entity's catalog kind and id.
type receiptBinding struct {
	key  *receiptKey
	kind byte
	id   uint64
}

// issue is the receipt of delivery (offset, token) of cursor p.
func (rb receiptBinding) issue(p int, offset int64, token uint64) string {
	var buf [receiptMaxRaw]byte
	b := append(buf[:0], receiptFormat)
	b = binary.AppendUvarint(b, uint64(p))
	b = binary.AppendUvarint(b, uint64(offset))
	b = binary.AppendUvarint(b, token)
	b = rb.key.mac(b, rb.kind, rb.id, b)
	var out [(receiptMaxRaw*8 + 5) / 6]byte
	n := receiptEncoding.EncodedLen(len(b))
	receiptEncoding.Encode(out[:n], b)
	return string(out[:n])
}

// open checks a receipt against the binding and returns its cursor and
// the cursor's own receipt. Anything not issued by issue under this
// binding is ErrReceiptInvalid; a receipt of the first format is
// errReceiptLegacy.
func (rb receiptBinding) open(s string) (int, queue.Receipt, error) {
	var buf [receiptMaxRaw]byte
	if len(s) < receiptEncoding.EncodedLen(receiptMinRaw) || len(s) > receiptEncoding.EncodedLen(receiptMaxRaw) {
		return 0, queue.Receipt{}, rb.legacyOr(s, "length")
	}
	var src [(receiptMaxRaw*8 + 5) / 6]byte
	n, err := receiptEncoding.Decode(buf[:], src[:copy(src[:], s)])
	// Decode skips \r and \n; a receipt has one spelling, so every
	// character must have been decoded.
	if err != nil || n < receiptMinRaw || receiptEncoding.EncodedLen(n) != len(s) || buf[0] != receiptFormat {
		return 0, queue.Receipt{}, rb.legacyOr(s, "encoding")
	}
	body, sum := buf[:n-receiptMACLen], buf[n-receiptMACLen:n]
	var want [receiptMaxRaw]byte
	if !hmac.Equal(sum, rb.key.mac(want[:0], rb.kind, rb.id, body)) {
		return 0, queue.Receipt{}, fmt.Errorf("%w: not a receipt of this %s", ErrReceiptInvalid, rb.what())
	}
	var f [3]uint64
	rest := body[1:]
	for i := range f {
		v, k := binary.Uvarint(rest)
		if k <= 0 {
			return 0, queue.Receipt{}, fmt.Errorf("%w: fields", ErrReceiptInvalid)
		}
		f[i], rest = v, rest[k:]
	}
	if len(rest) != 0 || f[0] > math.MaxInt32 || f[1] > math.MaxInt64 || f[2] == 0 {
		return 0, queue.Receipt{}, fmt.Errorf("%w: fields", ErrReceiptInvalid)
	}
	return int(f[0]), queue.Receipt{Offset: int64(f[1]), Token: f[2]}, nil
}

// legacyOr is errReceiptLegacy if s is a receipt of the first format, else
// ErrReceiptInvalid for why.
func (rb receiptBinding) legacyOr(s, why string) error {
	if _, r, ok := strings.Cut(s, ":"); ok && rb.kind == receiptOfSub {
		s = r
	}
	if _, err := queue.ParseReceipt(s); err == nil {
		return errReceiptLegacy
	}
	return fmt.Errorf("%w: %s", ErrReceiptInvalid, why)
}

func (rb receiptBinding) what() string {
	if rb.kind == receiptOfSub {
		return "subscription"
	}
	return "queue"
}

// rebindLegacy turns a receipt of the first format into one of rb, for
// receipts the broker kept itself (a redrive's batch in hand): those are
// known to be this queue's. Anything else is returned as it is.
func (rb receiptBinding) rebindLegacy(s string) string {
	if _, _, err := rb.open(s); !errors.Is(err, errReceiptLegacy) || strings.Contains(s, ":") {
		return s
	}
	r, _ := queue.ParseReceipt(s)
	return rb.issue(0, r.Offset, r.Token)
}

// DataDirID names this data directory: 16 bytes of HMAC-SHA256 under its receipt key,
// base64url as Kafka writes its cluster ids (22 characters). Stable while the directory
// lives, different for every directory, and it says nothing of the key.
func (b *Broker) DataDirID() string {
	m := b.receipts.macs.Get().(*receiptMAC)
	defer b.receipts.macs.Put(m)
	m.h.Reset()
	m.h.Write([]byte("sluice data directory id\x00"))
	return base64.RawURLEncoding.EncodeToString(m.h.Sum(nil)[:16])
}
