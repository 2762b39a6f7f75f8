package broker

import (
	"context"
	"encoding/json"
	"sort"
)

// Share group configs in a cluster are the catalog's (meta's group configs, the
// ShareConfig's JSON): every partition leader serving a group reads the same lock duration
// and delivery limit, and the coordinator the same offset reset. A node's
// share-groups.json is not read in a cluster.

// shareConfig is a group's config in the catalog as this node has applied it, and whether
// one was set.
func (c *clusterRT) shareConfig(group string) (ShareConfig, bool) {
	cfg := DefaultShareConfig()
	raw, ok := c.meta.State().GroupConfigs[group]
	if !ok {
		return cfg, false
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		c.log.Error("cluster: a share group's config in the catalog is unreadable; using the defaults", "group", group, "err", err)
		return DefaultShareConfig(), true
	}
	return cfg, true
}

// alterShareGroupConfig is AlterShareGroupConfig in a cluster: the changes applied to the
// catalog's config, proposed whole (a follower forwards it to the metadata leader). Two
// alters of one group at once through nodes whose catalogs lag can lose one's change, as
// for topic settings.
func (c *clusterRT) alterShareGroupConfig(group string, changes map[string]*string, validateOnly bool) error {
	cfg, _ := c.shareConfig(group)
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := cfg.Set(k, changes[k]); err != nil {
			return err
		}
	}
	if cfg.DeadLetterQueue != "" {
		// A catalog queue: the copies are Puts into its group (cluster_subs_dlq.go).
		if _, err := c.getQueue(cfg.DeadLetterQueue); err != nil {
			return invalid(ShareDeadLetterKey, "%v", err)
		}
	}
	if validateOnly {
		return nil
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return c.setGroupConfig(group, data)
}

// setGroupConfig proposes a group's config (nil: none).
func (c *clusterRT) setGroupConfig(group string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	return c.catalogErr(c.cat.SetGroupConfig(ctx, group, data))
}

// shareConfigGroups are the groups with a config in the catalog.
func (c *clusterRT) shareConfigGroups() []string {
	cfgs := c.meta.State().GroupConfigs
	out := make([]string, 0, len(cfgs))
	for g := range cfgs {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
