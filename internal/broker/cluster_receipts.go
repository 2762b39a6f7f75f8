package broker

// Receipts of replicated queues and subscriptions.
//
// A single node authenticates its receipts with its data directory's key (receipt.go). A
// cluster's receipts must open on whichever node leads when the client comes back, so
// their key is the cluster's: the catalog's (meta.State.ReceiptKey), made by the metadata
// leader when the feature level reaches meta.LevelReceiptKey and replicated like the rest
// of the catalog. With it, a receipt has the single node's format, bound to the queue's
// Raft group (a queue deleted and created again gets a new one) or to the subscription's
// catalog id and the partition, and none can be forged from a delivery's offset and
// fencing token, which a client sees.
//
// Before that level (a cluster part-way through an upgrade), receipts are the first
// cluster format, "c<group>.<cursor receipt>" and "s<id>.<partition>.<cursor receipt>":
// bound, not authenticated. Once the key exists those are refused as stale, as a single
// node refuses its own first format: the message is delivered again when its visibility
// timeout ends, which loses nothing.

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

// errClusterReceiptUnauthenticated refuses a receipt of the first cluster format once the
// cluster authenticates its receipts.
var errClusterReceiptUnauthenticated = fmt.Errorf("%w: issued before the cluster authenticated its receipts (an upgrade); the message is delivered again when its visibility timeout ends", ErrReceiptStale)

// receipts is the cluster's receipt key, or nil while the catalog has none.
func (c *clusterRT) receipts() *receiptKey {
	key := c.meta.State().ReceiptKey
	if key == nil {
		return nil
	}
	if k := c.receiptKey.Load(); k != nil && bytes.Equal(k.raw, key) {
		return k
	}
	k := newReceiptKey(key)
	c.receiptKey.Store(k)
	return k
}

// queueReceipt is the receipt of a replicated queue's delivery: offset, fencing token and
// the cursor's receipt (which holds the same two).
func (c *clusterRT) queueReceipt(g multiraft.GroupID, offset int64, token uint64, r string) string {
	k := c.receipts()
	if k == nil {
		return "c" + strconv.FormatUint(uint64(g), 10) + "." + r
	}
	return receiptBinding{key: k, kind: receiptOfQueue, id: uint64(g)}.issue(0, offset, token)
}

// openQueueReceipt checks a receipt of queue group g and returns its cursor receipt.
func (c *clusterRT) openQueueReceipt(g multiraft.GroupID, receipt string) (string, error) {
	return openClusterQueueReceipt(c.receipts(), g, receipt)
}

// openClusterQueueReceipt is openQueueReceipt under key k (nil: the cluster has none yet).
func openClusterQueueReceipt(k *receiptKey, g multiraft.GroupID, receipt string) (string, error) {
	head, rest, firstFormat := strings.Cut(receipt, ".") // base64url has no '.'
	switch {
	case firstFormat && head != "c"+strconv.FormatUint(uint64(g), 10):
		return "", ErrReceiptInvalid
	case firstFormat && k != nil:
		return "", errClusterReceiptUnauthenticated
	case firstFormat:
		if len(rest) > replqueue.MaxString {
			return "", ErrReceiptInvalid
		}
		return rest, nil
	case k == nil:
		return "", fmt.Errorf("%w: the cluster has no receipt key yet", ErrReceiptInvalid)
	}
	_, cr, err := receiptBinding{key: k, kind: receiptOfQueue, id: uint64(g)}.open(receipt)
	if err != nil {
		return "", err
	}
	return cr.String(), nil
}

// subReceipt is the receipt of a replicated subscription's delivery from partition p:
// offset, fencing token and the cursor's receipt (which holds the same two).
func (c *clusterRT) subReceipt(id uint64, p int32, offset int64, token uint64, r string) string {
	k := c.receipts()
	if k == nil {
		return "s" + strconv.FormatUint(id, 10) + "." + strconv.Itoa(int(p)) + "." + r
	}
	return receiptBinding{key: k, kind: receiptOfSub, id: id}.issue(int(p), offset, token)
}

// openSubReceipt checks a receipt of subscription id and returns its partition and cursor
// receipt.
func (c *clusterRT) openSubReceipt(id uint64, receipt string) (int32, string, error) {
	return openClusterSubReceipt(c.receipts(), id, receipt)
}

// openClusterSubReceipt is openSubReceipt under key k (nil: the cluster has none yet).
func openClusterSubReceipt(k *receiptKey, id uint64, receipt string) (int32, string, error) {
	head, rest, firstFormat := strings.Cut(receipt, ".")
	switch {
	case firstFormat && head != "s"+strconv.FormatUint(id, 10):
		return 0, "", ErrReceiptInvalid
	case firstFormat:
		ps, cr, ok := strings.Cut(rest, ".")
		p, err := strconv.ParseInt(ps, 10, 32)
		if !ok || err != nil || p < 0 || len(cr) > replcursor.MaxReceipt {
			return 0, "", ErrReceiptInvalid
		}
		if k != nil {
			return 0, "", errClusterReceiptUnauthenticated
		}
		return int32(p), cr, nil
	case k == nil:
		return 0, "", fmt.Errorf("%w: the cluster has no receipt key yet", ErrReceiptInvalid)
	}
	p, cr, err := receiptBinding{key: k, kind: receiptOfSub, id: id}.open(receipt)
	if err != nil {
		return 0, "", err
	}
	return int32(p), cr.String(), nil
}
