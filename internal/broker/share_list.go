package broker

import (
	"fmt"
	"slices"
	"sort"
)

// Which share groups exist. Kafka keeps a share group (its type, its
// state) until it is deleted; here a share group's lasting state is its
// subscriptions, so a group exists while it has members, a config
// (share-groups.json) or a subscription named after it — which is also
// how a native subscription is seen as a share group of the same name,
// and how a share group is still listed after a restart, before any member
// joins again.

// ShareGroupSummary is a share group as ListGroups lists it.
type ShareGroupSummary struct {
	Group   string
	State   string // Empty or Stable
	Members int
}

// ListShareGroups lists every share group, sorted by id. In a cluster the
// members are the coordinator's (a node that is not lists none) and the
// subscriptions the catalog's.
func (b *Broker) ListShareGroups() []ShareGroupSummary {
	members := map[string]int{}
	for _, id := range b.shareGroupIDs() {
		members[id] = 0
	}
	sg := b.shares()
	sg.mu.Lock()
	groups := make([]*shareGroup, 0, len(sg.groups))
	for _, g := range sg.groups {
		groups = append(groups, g)
	}
	sg.mu.Unlock()
	now := b.now()
	for _, g := range groups {
		g.mu.Lock()
		b.expireMembersLocked(g, now)
		members[g.id] += len(g.members)
		g.mu.Unlock()
	}
	out := make([]ShareGroupSummary, 0, len(members))
	for id, n := range members {
		s := ShareGroupSummary{Group: id, State: "Empty", Members: n}
		if n > 0 {
			s.State = "Stable"
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// shareGroupIDs is the ids of the groups that exist without members: the
// configured ones and the names of every subscription.
func (b *Broker) shareGroupIDs() []string {
	if b.cluster != nil {
		return append(b.cluster.shareConfigGroups(), b.cluster.shareSubscriptionNames()...)
	}
	sg := b.shares()
	sg.mu.Lock()
	ids := make([]string, 0, len(sg.configs))
	for id := range sg.configs {
		ids = append(ids, id)
	}
	sg.mu.Unlock()
	for _, t := range b.streams.topicList() {
		t.mu.RLock()
		for name := range t.subs {
			ids = append(ids, name)
		}
		t.mu.RUnlock()
	}
	return ids
}

// shareGroupExists reports whether a group with no members exists: it has
// a config or a subscription named after it.
func (b *Broker) shareGroupExists(group string) bool {
	if b.cluster != nil {
		_, configured := b.cluster.shareConfig(group)
		return configured || slices.Contains(b.cluster.shareSubscriptionNames(), group)
	}
	sg := b.shares()
	sg.mu.Lock()
	_, configured := sg.configs[group]
	sg.mu.Unlock()
	if configured {
		return true
	}
	for _, t := range b.streams.topicList() {
		t.mu.RLock()
		_, ok := t.subs[group]
		t.mu.RUnlock()
		if ok {
			return true
		}
	}
	return false
}

// DeleteShareGroup deletes an empty share group: its subscriptions (the
// state of its share-partitions, which a native subscriber of the same
// name reads too), its config and its epoch. ErrGroupNotFound if there is
// no such group, ErrGroupNotEmpty while it has members.
func (b *Broker) DeleteShareGroup(group string) error {
	if !b.shareGroupExists(group) && b.shares().group(group, false) == nil {
		return fmt.Errorf("%w: share group %s", ErrGroupNotFound, group)
	}
	g, unlock, err := b.lockEmptyShareGroup(group)
	if err != nil {
		return err
	}
	defer unlock()
	for _, topic := range b.ShareGroupTopics(group) {
		if err := b.DeleteSubscription(topic, group); err != nil {
			return err
		}
	}
	sg := b.shares()
	if b.cluster != nil {
		if _, ok := b.cluster.shareConfig(group); ok {
			if err := b.cluster.setGroupConfig(group, nil); err != nil {
				return err
			}
		}
		sg.mu.Lock()
		if sg.groups[group] == g {
			delete(sg.groups, group)
		}
		sg.mu.Unlock()
		return nil
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if _, ok := sg.configs[group]; ok {
		next := make(map[string]ShareConfig, len(sg.configs))
		for k, v := range sg.configs {
			if k != group {
				next[k] = v
			}
		}
		if err := sg.saveLocked(next); err != nil {
			return err
		}
		sg.configs = next
	}
	if sg.groups[group] == g {
		delete(sg.groups, group)
	}
	return nil
}
