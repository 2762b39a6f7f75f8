package meta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Group configs: a consumer or share group's configs (Kafka's GROUP config resource: a
// share group's lock duration, delivery limit, offset reset), opaque to meta (the broker's
// JSON), by group id. They are the catalog's so that every node reads the same: a share
// group's partitions are served by their leaders, each reading the group's configs.
//
// Upgrades: every node must run a build that knows OpSetGroupConfig before a group config
// is set in a cluster (an older replica stops on the entry, as on every op it does not
// know), and snapshots carry them in versions 7 and 8, written only while some group has a
// config (so a cluster that sets none writes what older builds read).

// OpSetGroupConfig sets a group's configs (empty settings: removes them).
//
//	14 SetGroupConfig  name(bytes) settings(bytes)
const OpSetGroupConfig Op = 14

// Limits of a group config.
const (
	MaxGroupName   = 255     // Kafka's group ids are free-form; sluice's share group ids are shorter
	MaxGroupConfig = 1 << 16 // one group's configs
)

// ErrInvalidGroupName refuses a group id that is empty or too long.
var ErrInvalidGroupName = errors.New("meta: invalid group id")

// applyGroupConfig sets or removes one group's configs; the map is replaced whole.
func (s *State) applyGroupConfig(c *Command) Result {
	if c.Name == "" || len(c.Name) > MaxGroupName {
		return Result{Err: fmt.Errorf("%w: %q", ErrInvalidGroupName, c.Name)}
	}
	next := maps.Clone(s.GroupConfigs)
	if next == nil {
		next = map[string][]byte{}
	}
	if len(c.Settings) == 0 {
		delete(next, c.Name)
	} else {
		next[c.Name] = bytes.Clone(c.Settings)
	}
	if len(next) == 0 {
		next = nil // as a snapshot without any restores it
	}
	s.GroupConfigs = next
	return Result{}
}

// encodeGroupConfigs appends the snapshot's group configs section:
//
//	n(uvarint) {name(bytes) settings(bytes)}...  by name
func (s *State) encodeGroupConfigs(b []byte) []byte {
	names := slices.Sorted(maps.Keys(s.GroupConfigs))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		b = appendBytes(b, s.GroupConfigs[name])
	}
	return b
}

// groupConfigs reads the section encodeGroupConfigs wrote: names sorted, unique, legal;
// settings not empty.
func (d *decoder) groupConfigs(s *State) {
	n := d.count()
	prev := ""
	for i := uint64(0); i < n && d.Err == nil; i++ {
		name := string(d.Bytes(MaxGroupName))
		set := d.Bytes(MaxGroupConfig)
		if d.Err != nil {
			return
		}
		if name == "" || (i > 0 && name <= prev) || len(set) == 0 {
			d.Fail("group config %q", name)
			return
		}
		if s.GroupConfigs == nil {
			s.GroupConfigs = map[string][]byte{}
		}
		s.GroupConfigs[name] = bytes.Clone(set)
		prev = name
	}
}

// SetGroupConfig sets group's configs (nil or empty: removes them), through the leader
// from a follower, and returns once this node applied it.
func (c *Catalog) SetGroupConfig(ctx context.Context, group string, settings []byte) error {
	if group == "" || len(group) > MaxGroupName {
		return fmt.Errorf("%w: %q", ErrInvalidGroupName, group)
	}
	if len(settings) > MaxGroupConfig {
		return fmt.Errorf("meta: group config of %d bytes (max %d)", len(settings), MaxGroupConfig)
	}
	cmd := Command{Op: OpSetGroupConfig, Name: group, Settings: settings}
	if _, err := c.do(ctx, cmd); !errors.Is(err, ErrNotLeader) {
		return err // nil, the refusal, or an outcome unknown
	}
	return c.forward(ctx, cmd, func(s *State) bool {
		return bytes.Equal(s.GroupConfigs[group], settings)
	})
}
