package kafka

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// topicConfig is one Kafka topic config sluice maps onto TopicSettings.
type topicConfig struct {
	name  string
	typ   kmsg.ConfigType
	get   func(broker.TopicSettings) string
	set   func(*broker.TopicSettings, string) error
	isDef func(broker.TopicSettings) bool
	// reset restores the default (a zero that the broker normalizes).
	reset func(*broker.TopicSettings)
}

// topicConfigs are the topic configs CreateTopics accepts and
// DescribeConfigs reports. Kafka's retention.ms -1 is "forever", which the
// broker spells as a negative retention.
var topicConfigs = []topicConfig{
	{
		name: "retention.ms", typ: kmsg.ConfigTypeLong,
		get: func(s broker.TopicSettings) string {
			if s.Retention < 0 {
				return "-1"
			}
			return strconv.FormatInt(s.Retention.Milliseconds(), 10)
		},
		set: func(s *broker.TopicSettings, v string) error {
			ms, err := strconv.ParseInt(v, 10, 64)
			switch {
			case err != nil || ms < -1 || ms == 0:
				return fmt.Errorf("retention.ms %q: want -1 or a positive number of milliseconds", v)
			case ms == -1:
				s.Retention = -1
			default:
				s.Retention = time.Duration(ms) * time.Millisecond
			}
			return nil
		},
		isDef: func(s broker.TopicSettings) bool { return s.Retention == broker.DefaultTopicRetention },
		reset: func(s *broker.TopicSettings) { s.Retention = 0 },
	},
	{
		name: "retention.bytes", typ: kmsg.ConfigTypeLong,
		get: func(s broker.TopicSettings) string {
			if s.RetentionBytes <= 0 {
				return "-1"
			}
			return strconv.FormatInt(s.RetentionBytes, 10)
		},
		set: func(s *broker.TopicSettings, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < -1 {
				return fmt.Errorf("retention.bytes %q: want -1 or a number of bytes", v)
			}
			s.RetentionBytes = n
			return nil
		},
		isDef: func(s broker.TopicSettings) bool { return s.RetentionBytes <= 0 },
		reset: func(s *broker.TopicSettings) { s.RetentionBytes = 0 },
	},
	{
		name: "max.message.bytes", typ: kmsg.ConfigTypeInt,
		get: func(s broker.TopicSettings) string { return strconv.Itoa(s.MaxMessageBytes) },
		set: func(s *broker.TopicSettings, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("max.message.bytes %q: want a positive number of bytes", v)
			}
			s.MaxMessageBytes = n
			return nil
		},
		isDef: func(s broker.TopicSettings) bool { return s.MaxMessageBytes == broker.DefaultTopicMaxMessageBytes },
		reset: func(s *broker.TopicSettings) { s.MaxMessageBytes = 0 },
	},
	{
		name: "cleanup.policy", typ: kmsg.ConfigTypeList,
		get: func(s broker.TopicSettings) string { return s.CleanupPolicy },
		set: func(s *broker.TopicSettings, v string) error {
			if strings.TrimSpace(v) == "" {
				// The broker reads "" as its default, delete: an empty list set on purpose
				// would silently do something else than asked.
				return fmt.Errorf("cleanup.policy %q: an empty list; want delete, compact or compact,delete", v)
			}
			s.CleanupPolicy = v // the broker refuses what it does not implement
			return nil
		},
		isDef: func(s broker.TopicSettings) bool { return s.CleanupPolicy == broker.CleanupDelete },
		reset: func(s *broker.TopicSettings) { s.CleanupPolicy = "" },
	},
	compactionConfigs[0], compactionConfigs[1], compactionConfigs[2], compactionConfigs[3],
	{
		// Read through withDefaults: 0 is the broker's --segment-bytes.
		name: "segment.bytes", typ: kmsg.ConfigTypeInt,
		get: func(s broker.TopicSettings) string { return strconv.FormatInt(s.SegmentBytes, 10) },
		set: func(s *broker.TopicSettings, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < broker.MinTopicSegmentBytes || n > broker.MaxTopicSegmentBytes {
				return fmt.Errorf("segment.bytes %q: want %d (sluice's floor; Kafka's is 14) to %d bytes", v, broker.MinTopicSegmentBytes, broker.MaxTopicSegmentBytes)
			}
			s.SegmentBytes = n
			return nil
		},
		isDef: func(s broker.TopicSettings) bool { return s.SegmentBytes == 0 },
		reset: func(s *broker.TopicSettings) { s.SegmentBytes = 0 },
	},
}

// withDefaults fills the settings that follow a broker flag when a topic
// sets none, for reporting their value.
func withDefaults(s broker.TopicSettings, b *broker.Broker) broker.TopicSettings {
	if s.SegmentBytes == 0 {
		s.SegmentBytes = b.DefaultSegmentBytes()
	}
	return s
}

// fixedTopicConfigs are read-only facts of a one-node sluice that tools
// commonly ask about; CreateTopics accepts them only at these values.
var fixedTopicConfigs = []struct{ name, value string }{
	{"min.insync.replicas", "1"},
	{"compression.type", "producer"},
	{"message.timestamp.type", "CreateTime"},
}

// applyTopicConfigs sets the configs a CreateTopics request carries.
func applyTopicConfigs(s *broker.TopicSettings, cfgs []kmsg.CreateTopicsRequestTopicConfig) error {
	for _, cfg := range cfgs {
		if cfg.Value == nil {
			continue // null means the default
		}
		if err := setTopicConfig(s, cfg.Name, *cfg.Value); err != nil {
			return err
		}
	}
	return nil
}

// setTopicConfig sets one config by its Kafka name; a fixed one only at
// its value, anything else is refused so a setting never silently does
// nothing.
func setTopicConfig(s *broker.TopicSettings, name, value string) error {
	if tc := findTopicConfig(name); tc != nil {
		return tc.set(s, value)
	}
	for _, f := range fixedTopicConfigs {
		if f.name == name && f.value == value {
			return nil
		}
	}
	return fmt.Errorf("config %s=%q is not supported by sluice", name, value)
}

// resetTopicConfig restores one config's default; a fixed one is always
// at its default.
func resetTopicConfig(s *broker.TopicSettings, name string) error {
	if tc := findTopicConfig(name); tc != nil {
		tc.reset(s)
		return nil
	}
	for _, f := range fixedTopicConfigs {
		if f.name == name {
			return nil
		}
	}
	return fmt.Errorf("unknown topic config %s", name)
}

func findTopicConfig(name string) *topicConfig {
	for i := range topicConfigs {
		if topicConfigs[i].name == name {
			return &topicConfigs[i]
		}
	}
	return nil
}
