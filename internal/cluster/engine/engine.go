package engine

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
)

// Engine is a raftstore.Store seen as a multiraft.Engine. Its methods may be called from
// several goroutines, as the Store's may.
type Engine struct {
	store *raftstore.Store
}

var _ multiraft.Engine = (*Engine)(nil)

// New wraps an open store. The store stays the caller's to close, after the host that
// uses the engine is closed.
func New(store *raftstore.Store) *Engine { return &Engine{store: store} }

// Open opens (creating if needed) the Raft directory opts names and wraps it.
func Open(opts raftstore.Options) (*Engine, error) {
	s, err := raftstore.Open(opts)
	if err != nil {
		return nil, err
	}
	return New(s), nil
}

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
