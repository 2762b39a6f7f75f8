package engine

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Engine is a raftstore.Store seen as a multiraft.Engine. Its methods may be called from
// several goroutines, as the Store's may.
type Engine struct {
	store *raftstore.Store
	id    identity
	fresh bool
}

var _ multiraft.Engine = (*Engine)(nil)

// New wraps an open store, with no identity check (tests, tools). The store stays the
// caller's to close, after the host that uses the engine is closed.
func New(store *raftstore.Store) *Engine { return &Engine{store: store} }

// Open opens a node's Raft directory: it checks (or, for a new node, writes) the
// directory's identity, then opens the store. A directory of another node is ErrWrongNode;
// with Options.Member, an empty one is ErrStateLost.
func Open(o Options) (*Engine, error) {
	if o.Node == 0 || o.Store.Dir == "" {
		return nil, fmt.Errorf("engine: Options needs Node (non-zero) and Store.Dir")
	}
	if o.Store.FS == nil {
		o.Store.FS = vfs.Default
	}
	id, fresh, err := loadIdentity(o)
	if err != nil {
		return nil, err
	}
	s, err := raftstore.Open(o.Store)
	if err != nil {
		return nil, err
	}
	return &Engine{store: s, id: id, fresh: fresh}, nil
}

// Incarnation is a random number drawn when the node's Raft directory was created: a node
// that comes back on a new disk comes back with another one. (Nothing but the identity
// check uses it yet; it is what a replica identity that survives wipes would be built on.)
func (e *Engine) Incarnation() uint64 { return e.id.incarnation }

// Fresh reports whether Open created the directory's identity: a new node's first start.
func (e *Engine) Fresh() bool { return e.fresh }

// Store is the wrapped store.
func (e *Engine) Store() *raftstore.Store { return e.store }

// Close closes the store.
func (e *Engine) Close() error { return e.store.Close() }

// Group opens group g's storage, creating it empty if it has none (raftstore.Store.Group).
func (e *Engine) Group(g multiraft.GroupID) (multiraft.Storage, error) {
	st, err := e.store.Group(uint64(g))
	if err != nil {
		// Never a typed nil inside the interface: the host checks err, a caller might not.
		return nil, err
	}
	return st, nil
}

// GroupIDs lists the groups that have storage on disk, open or not, in id order.
func (e *Engine) GroupIDs() ([]multiraft.GroupID, error) {
	ids, err := e.store.GroupIDs()
	out := make([]multiraft.GroupID, len(ids))
	for i, id := range ids {
		out[i] = multiraft.GroupID(id)
	}
	return out, err
}

// RemoveGroup deletes group g's storage, durably when it returns.
func (e *Engine) RemoveGroup(g multiraft.GroupID) error {
	return e.store.RemoveGroup(uint64(g))
}

// Sync makes every write so far to the given groups durable with one Store.Sync: one
// concurrent round of the groups' log fdatasyncs, then one fdatasync of the shared
// HardState log. A storage this engine did not hand out is an error, and nothing is synced:
// the host would otherwise count on a write that no Sync covered.
func (e *Engine) Sync(written []multiraft.Storage) error {
	if len(written) == 0 {
		return nil
	}
	groups := make([]*raftstore.Group, len(written))
	for k, st := range written {
		g, ok := st.(*raftstore.Group)
		if !ok || g == nil {
			return fmt.Errorf("engine: Sync of a %T, not a raftstore group", st)
		}
		groups[k] = g
	}
	return e.store.Sync(groups...)
}
