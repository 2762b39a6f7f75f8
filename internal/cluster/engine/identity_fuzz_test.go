package engine

import (
	"bytes"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// FuzzDecodeIdentity: any bytes decode to an identity or an error, never a panic, and
// what decodes encodes back to the same bytes (so a damaged file is never half-accepted).
func FuzzDecodeIdentity(f *testing.F) {
	f.Add(identity{node: 1, incarnation: 7}.encode())
	f.Add(identity{node: multiraft.NodeID(^uint64(0)), incarnation: 1}.encode())
	f.Add([]byte("SLID"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeIdentity(b)
		if err != nil {
			return
		}
		if !bytes.Equal(id.encode(), b) {
			t.Fatalf("%x decoded to %+v, which encodes to %x", b, id, id.encode())
		}
	})
}
