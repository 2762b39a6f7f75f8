package broker

import (
	"sync"
	"sync/atomic"
)

// headerValueBytes is the room encodeHeaders' value buffer needs for the
// values it copies (the rest, times and dead-letter details, are rare and
// allocate their own).
func headerValueBytes(m *Message) int {
	n := len(m.ID) + len(m.GroupID) + len(m.DedupID)
	for _, a := range m.Attributes {
		n += len(a.DataType) + 1 + len(a.Value)
	}
	for _, v := range m.System {
		n += len(v)
	}
	return n
}

// valueArena hands out header values cut from one buffer. Each value's
// capacity ends at its length, so nothing appending to one can reach the
// next; a buffer sized short only grows into a new array, which leaves
// the values already cut where they were.
type valueArena []byte

func (a *valueArena) add(s string) []byte {
	start := len(*a)
	*a = append(*a, s...)
	return (*a)[start:len(*a):len(*a)]
}

// attr is an attribute's value as a record carries it: data type, NUL,
// value.
func (a *valueArena) attr(at Attribute) []byte {
	start := len(*a)
	*a = append(append(append(*a, at.DataType...), 0), at.Value...)
	return (*a)[start:len(*a):len(*a)]
}

// keyCache holds the record header keys of attribute names ("a." or "s."
// and the name) seen so far, up to maxCachedKeys: the same few names
// (SenderId, a client's attribute names) come with every message. Names
// past the bound are concatenated each time, so a client sending endless
// new names costs what it did before and no memory. The map is replaced,
// never changed, so a lookup takes no lock; a lookup through a built-in map
// indexed by string(bytes) does not allocate, as sync.Map's any key would.
type keyCache struct {
	mu sync.Mutex // serialises the copies
	m  atomic.Pointer[map[string]string]
}

const (
	maxCachedKeys    = 1024
	maxCachedNameLen = 64
)

var headerKeys keyCache

func (c *keyCache) key(prefix, name string) string {
	if len(name) > maxCachedNameLen {
		return prefix + name
	}
	var buf [8 + maxCachedNameLen]byte
	k := append(append(buf[:0], prefix...), name...)
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[string(k)]; ok {
			return v
		}
	}
	s := string(k)
	c.add(s)
	return s
}

// add puts s in a copy of the cache, if there is room.
func (c *keyCache) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && (len(*old) >= maxCachedKeys || (*old)[s] != "") {
		return
	}
	m := make(map[string]string, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[s] = s
	c.m.Store(&m)
}

func lenOf(m *map[string]string) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
