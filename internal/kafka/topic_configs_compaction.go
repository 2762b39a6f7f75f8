package kafka

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// compactionConfigs are the configs of a compacted topic, validated as
// Kafka's LogConfig does. The broker keeps a zero for "the default" and a
// negative for Kafka's 0 where 0 is not the default (delete.retention.ms,
// min.cleanable.dirty.ratio); max.compaction.lag.ms's default, Long.MAX,
// is the broker's 0 ("no maximum").
var compactionConfigs = [...]topicConfig{
	{
		name: "delete.retention.ms", typ: kmsg.ConfigTypeLong,
		get: func(s broker.TopicSettings) string {
			switch {
			case s.DeleteRetention < 0:
				return "0"
			case s.DeleteRetention == 0:
				return strconv.FormatInt(broker.DefaultDeleteRetention.Milliseconds(), 10)
			}
			return strconv.FormatInt(s.DeleteRetention.Milliseconds(), 10)
		},
		set: func(s *broker.TopicSettings, v string) error {
			ms, err := parseMs("delete.retention.ms", v, 0)
			if err == nil {
				s.DeleteRetention = time.Duration(ms) * time.Millisecond
				if ms == 0 {
					s.DeleteRetention = -1
				}
			}
			return err
		},
		isDef: func(s broker.TopicSettings) bool {
			return s.DeleteRetention == 0 || s.DeleteRetention == broker.DefaultDeleteRetention
		},
		reset: func(s *broker.TopicSettings) { s.DeleteRetention = 0 },
	},
	{
		name: "min.compaction.lag.ms", typ: kmsg.ConfigTypeLong,
		get: func(s broker.TopicSettings) string { return strconv.FormatInt(s.MinCompactionLag.Milliseconds(), 10) },
		set: func(s *broker.TopicSettings, v string) error {
			ms, err := parseMs("min.compaction.lag.ms", v, 0)
			s.MinCompactionLag = time.Duration(ms) * time.Millisecond
			return err
		},
		isDef: func(s broker.TopicSettings) bool { return s.MinCompactionLag == 0 },
		reset: func(s *broker.TopicSettings) { s.MinCompactionLag = 0 },
	},
	{
		name: "max.compaction.lag.ms", typ: kmsg.ConfigTypeLong,
		get: func(s broker.TopicSettings) string {
			if s.MaxCompactionLag == 0 {
				return strconv.FormatInt(math.MaxInt64, 10)
			}
			return strconv.FormatInt(s.MaxCompactionLag.Milliseconds(), 10)
		},
		set: func(s *broker.TopicSettings, v string) error {
			ms, err := parseMs("max.compaction.lag.ms", v, 1)
			switch {
			case err != nil:
				return err
			case ms >= math.MaxInt64/int64(time.Millisecond):
				s.MaxCompactionLag = 0 // Kafka's "never forced"
			default:
				s.MaxCompactionLag = time.Duration(ms) * time.Millisecond
			}
			return nil
		},
		isDef: func(s broker.TopicSettings) bool { return s.MaxCompactionLag == 0 },
		reset: func(s *broker.TopicSettings) { s.MaxCompactionLag = 0 },
	},
	{
		name: "min.cleanable.dirty.ratio", typ: kmsg.ConfigTypeDouble,
		get: func(s broker.TopicSettings) string {
			switch {
			case s.MinCleanableDirtyRatio < 0:
				return "0.0"
			case s.MinCleanableDirtyRatio == 0:
				return strconv.FormatFloat(broker.DefaultMinCleanableDirtyRatio, 'f', -1, 64)
			}
			return strconv.FormatFloat(s.MinCleanableDirtyRatio, 'f', -1, 64)
		},
		set: func(s *broker.TopicSettings, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(r) || r < 0 || r > 1 {
				return fmt.Errorf("min.cleanable.dirty.ratio %q: want a number from 0 to 1", v)
			}
			s.MinCleanableDirtyRatio = r
			if r == 0 {
				s.MinCleanableDirtyRatio = -1
			}
			return nil
		},
		isDef: func(s broker.TopicSettings) bool {
			return s.MinCleanableDirtyRatio == 0 || s.MinCleanableDirtyRatio == broker.DefaultMinCleanableDirtyRatio
		},
		reset: func(s *broker.TopicSettings) { s.MinCleanableDirtyRatio = 0 },
	},
}

// parseMs reads a Kafka duration config in milliseconds, at least lo.
func parseMs(name, v string, lo int64) (int64, error) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < lo {
		return 0, fmt.Errorf("%s %q: want a whole number of milliseconds, at least %d", name, v, lo)
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		ms = math.MaxInt64 / int64(time.Millisecond)
	}
	return ms, nil
}
