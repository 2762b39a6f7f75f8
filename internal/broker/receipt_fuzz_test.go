package broker

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/queue"
)

// FuzzReceiptOpen: no input panics the decoder; anything it accepts is
// exactly what issue makes for the fields it returns (one spelling per
// receipt), and everything else is invalid or, for the first format, stale.
func FuzzReceiptOpen(f *testing.F) {
	rb := receiptBinding{key: newReceiptKey([]byte("0123456789abcdef0123456789abcdef")), kind: receiptOfSub, id: 42}
	f.Add(rb.issue(0, 0, 1))
	f.Add(rb.issue(3, 1<<40, 1<<62))
	f.Add(queue.Receipt{Offset: 7, Token: 8}.String())
	f.Add("2:" + queue.Receipt{Offset: 7, Token: 8}.String())
	f.Add("")
	f.Add("AQAAAAAAAAAAAAAAAAAAAAF3Yvy1")
	r := rb.issue(1, 2, 3)
	f.Add(r[:10] + "\r\n" + r[10:]) // base64 decoding skips newlines

	f.Fuzz(func(t *testing.T, s string) {
		p, r, err := rb.open(s)
		if err != nil {
			if !errors.Is(err, ErrReceiptInvalid) && !errors.Is(err, ErrReceiptStale) {
				t.Fatalf("open(%q) = %v: neither invalid nor stale", s, err)
			}
			return
		}
		if again := rb.issue(p, r.Offset, r.Token); again != s {
			t.Fatalf("open(%q) accepted %d %+v, which issues as %q", s, p, r, again)
		}
	})
}
