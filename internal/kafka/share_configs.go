package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// alterGroupConfigs is IncrementalAlterConfigs on a GROUP resource: the
// share group configs (broker/share_config.go), all or nothing. SET sets,
// DELETE resets the default; a group config is no list.
func (c *conn) alterGroupConfigs(group string, cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) (int16, *string) {
	if !c.may(auth.Alter, auth.Group, group) {
		return kerr.GroupAuthorizationFailed.Code, nil
	}
	changes := map[string]*string{}
	for _, cfg := range cfgs {
		switch cfg.Op {
		case opSet:
			if cfg.Value == nil {
				m := fmt.Sprintf("config %s: SET needs a value", cfg.Name)
				return kerr.InvalidConfig.Code, &m
			}
			changes[cfg.Name] = cfg.Value
		case opDelete:
			changes[cfg.Name] = nil
		default:
			m := fmt.Sprintf("config %s is not a list: APPEND and SUBTRACT apply to lists only", cfg.Name)
			return kerr.InvalidConfig.Code, &m
		}
	}
	if err := c.s.b.AlterShareGroupConfig(group, changes, validateOnly); err != nil {
		return errCode(err, kerr.InvalidConfig), errMessage(err)
	}
	return 0, nil
}

// groupConfigEntries are a share group's configs, for DescribeConfigs of
// a GROUP resource.
func (c *conn) groupConfigEntries(group string) []configEntry {
	cfg, def := c.s.b.ShareGroupConfig(group).Values(), broker.DefaultShareConfig().Values()
	var out []configEntry
	for _, k := range broker.ShareConfigKeys() {
		e := configEntry{name: k, value: cfg[k], typ: kmsg.ConfigTypeInt, source: kmsg.ConfigSourceGroupConfig}
		if k == broker.ShareAutoOffsetResetKey || k == broker.ShareDeadLetterKey {
			e.typ = kmsg.ConfigTypeString
		}
		if cfg[k] == def[k] {
			e.source = kmsg.ConfigSourceDefaultConfig
		}
		out = append(out, e)
	}
	return out
}
