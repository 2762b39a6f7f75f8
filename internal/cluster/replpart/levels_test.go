package replpart

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
)

// TestEntryKindsListed: EntryKinds lists exactly the kinds Apply decodes (an entry of any
// other first byte, and a cursor entry of any other kind, stops the group), so a new kind
// cannot be added without the broker giving it a feature level.
func TestEntryKindsListed(t *testing.T) {
	kinds := EntryKinds()
	for v := range 256 {
		m := NewMachine(1, &fakeLog{})
		err := m.Apply([]multiraft.Entry{{Index: 1, Term: 1, Data: []byte{byte(v), 0, 0, 0, 0, 0}}})
		known := err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", v))
		listed := slices.ContainsFunc(kinds, func(k EntryKind) bool { return k.Version == byte(v) })
		if known != listed {
			t.Errorf("first byte %d: Apply knows it %v, EntryKinds lists it %v", v, known, listed)
		}
	}
	for k := range 256 {
		_, err := decodeCursor([]byte{cursorVersion, 0, 0, 0, 0, byte(k)})
		known := err == nil || !strings.Contains(err.Error(), "unknown cursor entry kind")
		if listed := slices.Contains(kinds, CursorKind(replcursor.Kind(k))); known != listed {
			t.Errorf("cursor kind %d: decodeCursor knows it %v, EntryKinds lists it %v", k, known, listed)
		}
	}
}

// TestAdmitRefusesBeforeProposing: an entry its partition's admit function refuses (a
// produce, a trim, a cursor entry) is never proposed, and the others go on.
func TestAdmitRefusesBeforeProposing(t *testing.T) {
	c := newCluster(t, 5, 3)
	l := c.elect()
	notYet := errors.New("not at this level yet")
	refuse := func(kinds ...EntryKind) {
		for _, nd := range c.up() {
			nd.part.SetAdmit(func(k EntryKind) error {
				if slices.Contains(kinds, k) {
					return notYet
				}
				return nil
			})
		}
	}
	refuse(ProduceEntry, TrimKind, CursorKind(CursorCreate))
	if _, err := c.appendAt(l, "refused"); !errors.Is(err, notYet) {
		t.Fatalf("a refused produce: %v", err)
	}
	if _, err := c.trimAt(l, 0); !errors.Is(err, notYet) {
		t.Fatalf("a refused trim: %v", err)
	}
	if _, err := c.cursorAt(l, createAt(testSub, true)); !errors.Is(err, notYet) {
		t.Fatalf("a refused cursor create: %v", err)
	}
	c.nodes[l].log.mu.Lock()
	held := len(c.nodes[l].log.recs)
	c.nodes[l].log.mu.Unlock()
	if held != 0 {
		t.Fatalf("a refused produce reached the log: %d batches", held)
	}
	refuse()
	if _, err := c.appendAt(l, "admitted"); err != nil {
		t.Fatalf("a produce once admitted: %v", err)
	}
	if _, err := c.cursorAt(l, createAt(testSub, true)); err != nil {
		t.Fatalf("a cursor create once admitted: %v", err)
	}
}
