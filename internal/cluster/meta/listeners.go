package meta

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/wire"
)

// A node's TLS client listeners, as its peers learn them. The catalog's Node holds the
// plaintext listeners' advertised addresses (Kafka, native HTTP, SQS), which a node
// registers; a Kafka client that bootstrapped over TLS must be told the other nodes' TLS
// addresses instead, or it dials their plaintext ports and fails its handshake. Adding
// them to Node would change a replicated command and the snapshot format, so that a
// rolling upgrade would have to wait for a feature level; yet they are each node's own
// and change only when it restarts with other flags. So they are not replicated: a node
// answers its peers' question (the metadata group's request channel, as for the leaders
// it holds, nodestate.go) and each peer keeps what it was told. A binary from before this
// request answers nothing, and its TLS addresses stay unknown.

// Listeners are a node's TLS listeners' advertised addresses, host:port ("" none).
type Listeners struct {
	KafkaTLS, HTTPTLS, SQSTLS string
}

// SetListeners sets what this node answers its peers about its TLS listeners.
func (m *Machine) SetListeners(l Listeners) { m.listeners.Store(&l) }

// Listeners returns this node's TLS listeners as SetListeners set them.
func (m *Machine) Listeners() Listeners {
	if l := m.listeners.Load(); l != nil {
		return *l
	}
	return Listeners{}
}

// NodeListeners asks node for its TLS listeners' addresses. A node that cannot be asked,
// or answers no such request (a binary from before it), is an error.
func (c *Catalog) NodeListeners(ctx context.Context, node multiraft.NodeID) (Listeners, error) {
	if node == c.host.Node() {
		return c.sm.Listeners(), nil
	}
	b, err := c.host.Request(ctx, node, Group, []byte{requestListeners})
	if err != nil {
		return Listeners{}, err
	}
	return DecodeListeners(b)
}

// encode is kafka(bytes) http(bytes) sqs(bytes): bytes is a uvarint length then the bytes.
func (l Listeners) encode() []byte {
	b := appendString(nil, l.KafkaTLS)
	b = appendString(b, l.HTTPTLS)
	return appendString(b, l.SQSTLS)
}

// DecodeListeners parses a node's answer; anything malformed (trailing bytes, an address
// longer than MaxAddr) is an error.
func DecodeListeners(b []byte) (Listeners, error) {
	d := wire.Decoder{B: b, Bad: ErrBadCommand}
	l := Listeners{KafkaTLS: string(d.Bytes(MaxAddr)), HTTPTLS: string(d.Bytes(MaxAddr)), SQSTLS: string(d.Bytes(MaxAddr))}
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d bytes after the listeners", len(d.B))
	}
	if d.Err != nil {
		return Listeners{}, fmt.Errorf("meta: a node's listeners: %w", d.Err)
	}
	return l, nil
}
