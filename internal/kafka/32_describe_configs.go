package kafka

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleDescribeConfigs answers topic configs from TopicSettings and the
// broker configs clients and tools ask about. Other resource types (broker
// loggers, client metrics, groups) are refused per resource.
func handleDescribeConfigs(_ context.Context, c *conn, req *kmsg.DescribeConfigsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var entries []configEntry
		var err error
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if !c.may(auth.Describe, auth.Topic, r.ResourceName) {
				rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			entries, err = c.topicConfigEntries(r.ResourceName)
		case kmsg.ConfigResourceTypeBroker:
			if !c.may(auth.Describe, auth.Cluster, "") {
				rr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				break
			}
			entries = c.brokerConfigEntries()
		case kmsg.ConfigResourceTypeGroupConfig:
			if !c.may(auth.Describe, auth.Group, r.ResourceName) {
				rr.ErrorCode = kerr.GroupAuthorizationFailed.Code
				break
			}
			entries = c.groupConfigEntries(r.ResourceName)
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			err = fmt.Errorf("resource type %d is not supported", r.ResourceType)
		}
		if err != nil {
			if rr.ErrorCode == 0 {
				rr.ErrorCode = errCode(err, nil)
			}
			rr.ErrorMessage = errMessage(err)
		}
		for _, e := range entries {
			if r.ConfigNames == nil || slices.Contains(r.ConfigNames, e.name) {
				rr.Configs = append(rr.Configs, e.kmsg(req.Version))
			}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return msg(resp)
}

type configEntry struct {
	name, value string
	typ         kmsg.ConfigType
	source      kmsg.ConfigSource
	readOnly    bool
}

func (e configEntry) kmsg(version int16) kmsg.DescribeConfigsResponseResourceConfig {
	cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
	v := e.value
	cfg.Name, cfg.Value, cfg.ReadOnly = e.name, &v, e.readOnly
	cfg.Source, cfg.ConfigType = e.source, e.typ
	cfg.IsDefault = e.source == kmsg.ConfigSourceDefaultConfig // v0's field
	if version >= 1 {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = e.name, &v, e.source
		cfg.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn}
	}
	return cfg
}

func (c *conn) topicConfigEntries(name string) ([]configEntry, error) {
	info, err := c.s.b.DescribeTopic(name)
	if err != nil {
		return nil, err
	}
	s := info.Settings
	eff := withDefaults(s, c.s.b)
	var out []configEntry
	for _, tc := range topicConfigs {
		src := kmsg.ConfigSourceDynamicTopicConfig
		if tc.isDef(s) {
			src = kmsg.ConfigSourceDefaultConfig
		}
		out = append(out, configEntry{name: tc.name, value: tc.get(eff), typ: tc.typ, source: src})
	}
	for _, f := range fixedTopicConfigs {
		out = append(out, configEntry{name: f.name, value: f.value, typ: kmsg.ConfigTypeString,
			source: kmsg.ConfigSourceDefaultConfig, readOnly: true})
	}
	return out, nil
}

func (c *conn) brokerConfigEntries() []configEntry {
	static := func(name, value string, typ kmsg.ConfigType) configEntry {
		return configEntry{name: name, value: value, typ: typ, source: kmsg.ConfigSourceStaticBrokerConfig, readOnly: true}
	}
	return []configEntry{
		static("broker.id", strconv.Itoa(int(c.s.cfg.NodeID)), kmsg.ConfigTypeInt),
		static("num.partitions", strconv.Itoa(int(c.s.cfg.DefaultPartitions)), kmsg.ConfigTypeInt),
		static("auto.create.topics.enable", strconv.FormatBool(c.s.cfg.AutoCreateTopics), kmsg.ConfigTypeBoolean),
		static("default.replication.factor", "1", kmsg.ConfigTypeShort),
		static("min.insync.replicas", "1", kmsg.ConfigTypeInt),
		static("message.max.bytes", strconv.Itoa(broker.DefaultTopicMaxMessageBytes), kmsg.ConfigTypeInt),
		static("log.retention.ms", strconv.FormatInt(broker.DefaultTopicRetention.Milliseconds(), 10), kmsg.ConfigTypeLong),
		static("log.cleanup.policy", broker.CleanupDelete, kmsg.ConfigTypeList),
		static("connections.max.idle.ms", strconv.FormatInt(c.s.cfg.MaxIdle.Milliseconds(), 10), kmsg.ConfigTypeLong),
	}
}
