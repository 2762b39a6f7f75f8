package replpart

// Feature levels (docs/cluster.md, "Upgrades: one node at a time, and the feature level").
// A replica stops its partition's group on an entry it cannot decode, so a new kind of
// entry must not enter the log while a replica of an older build runs. This package knows
// its kinds; the broker knows which feature level admits each (its partitionEntryLevels)
// and what level the cluster is at, and checks every proposal through the Partition's
// admit function.

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
)

// EntryKind is one kind of entry of a partition's group: a produce, a trim, or a
// subscription cursor's entry of one kind.
type EntryKind struct {
	Version byte            // the entry's first byte: entryVersion, cursorVersion, trimVersion or forgetVersion
	Cursor  replcursor.Kind // a cursor entry's kind (0 for the others)
}

// The kinds that are not cursor entries.
var (
	ProduceEntry = EntryKind{Version: entryVersion}
	TrimKind     = EntryKind{Version: trimVersion}
)

// CursorKind is the kind of a cursor entry of kind k.
func CursorKind(k replcursor.Kind) EntryKind { return EntryKind{Version: cursorVersion, Cursor: k} }

func (k EntryKind) String() string {
	switch {
	case k == ProduceEntry:
		return "a produce"
	case k == TrimKind:
		return "a trim"
	case k == ForgetKind:
		return "a forget entry"
	case k.Version == cursorVersion:
		return fmt.Sprintf("a cursor entry of kind %d", k.Cursor)
	}
	return fmt.Sprintf("an entry of version %d", k.Version)
}

// EntryKinds lists every kind Apply decodes (TestEntryKindsListed fails when one is
// missing): the broker gives each the feature level that admits it.
func EntryKinds() []EntryKind {
	out := []EntryKind{ProduceEntry, TrimKind, ForgetKind}
	for _, k := range []replcursor.Kind{CursorCreate, replcursor.Receive, replcursor.Ack, replcursor.Nack,
		replcursor.Extend, CursorDelete, CursorReceiveLimited, CursorDeadDone, CursorSkipTo, CursorDeadLetter} {
		out = append(out, CursorKind(k))
	}
	return out
}

// SetAdmit sets the check every entry p proposes passes first: its error refuses the
// entry, which never reaches the log. nil (the default) admits every kind.
func (p *Partition) SetAdmit(admit func(EntryKind) error) { p.admit.Store(&admit) }

// admitted runs the admit function on kind.
func (p *Partition) admitted(kind EntryKind) error {
	if f := p.admit.Load(); f != nil && *f != nil {
		return (*f)(kind)
	}
	return nil
}
