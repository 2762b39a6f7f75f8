package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
	"github.com/sluice-mq/sluice/internal/queue"
)

// Changing a replicated queue's retention or extension limit (SetQueueAttributes'
// MessageRetentionPeriod). The catalog holds the queue's settings as the client set them
// last, and the queue's group applies times from a place in its log on (replqueue's
// Configure): the queue's leader proposes one whenever its machine's times differ from the
// catalog's, as the reconciler finds (at each catalog change and every few seconds), so a
// change made while the leader is down or moving is applied by the next one. A replica that
// replays its group from the start must begin with the times the group was created with, not
// the catalog's current ones, or it would expire messages its peers kept: those are kept
// beside the settings under createdTimesKey from the first change on (a queue whose times
// never changed has its settings' own).

// createdTimesKey is the catalog key, beside a queue's settings, of its group's creation times.
const createdTimesKey = "sluice_group_times"

// groupTimes are a queue's times as its group's machine holds them.
type groupTimes struct {
	Visibility   time.Duration `json:"visibility_ns"`
	MaxExtension time.Duration `json:"max_extension_ns"`
	Retention    time.Duration `json:"retention_ns"`
}

// timesOf are the times of s as its group applies them (replicatedConfig's).
func timesOf(s QueueSettings) replqueue.Times {
	c := replicatedConfig(s)
	return replqueue.Times{Visibility: c.Visibility, MaxExtension: c.MaxExtension, Retention: c.Retention}
}

// createdConfig is the configuration a replica of the queue builds its machine with.
func createdConfig(cq *meta.Queue, s QueueSettings) (queue.Config, error) {
	cfg := replicatedConfig(s)
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(cq.Settings, &extra); err != nil {
		return queue.Config{}, fmt.Errorf("catalog settings of queue %s: %w", cq.Name, err)
	}
	raw, ok := extra[createdTimesKey]
	if !ok {
		return cfg, nil
	}
	var t groupTimes
	if err := json.Unmarshal(raw, &t); err != nil {
		return queue.Config{}, fmt.Errorf("catalog group times of queue %s: %w", cq.Name, err)
	}
	cfg.Visibility, cfg.MaxExtension, cfg.Retention = t.Visibility, t.MaxExtension, t.Retention
	return cfg, nil
}

// withCreatedTimes is next's settings JSON with the group's creation times: the catalog's
// (prev, its current JSON) when it has them, else those of cur, the settings before this
// change (their times are the creation's: they never changed before).
func withCreatedTimes(next QueueSettings, prev []byte, cur QueueSettings) ([]byte, error) {
	data, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	var obj, old map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(prev, &old); err != nil {
		return nil, err
	}
	raw, ok := old[createdTimesKey]
	if !ok {
		if timesOf(next) == timesOf(cur) {
			return data, nil // nothing to keep yet
		}
		c := replicatedConfig(cur)
		if raw, err = json.Marshal(groupTimes{c.Visibility, c.MaxExtension, c.Retention}); err != nil {
			return nil, err
		}
	}
	obj[createdTimesKey] = raw
	return json.Marshal(obj)
}

// configureQueues has each queue this node leads take the catalog's times if its machine
// holds others: one Configure in flight per queue. Called with c.queues.mu held (every
// reconcile round: a queue's settings are decoded again only when its catalog entry,
// which a change replaces, is another one).
func (c *clusterRT) configureQueues(hosted []*hostedQueue) {
	st := c.meta.State()
	for _, h := range hosted {
		cq := st.Queues[h.name]
		if cq == nil || cq.Group != h.group {
			continue
		}
		if h.timesOf != cq {
			s, err := queueSettingsOf(cq)
			if err != nil {
				continue
			}
			h.timesOf, h.times = cq, timesOf(s)
		}
		want := h.times
		got := h.sm.Config()
		if (replqueue.Times{Visibility: got.Visibility, MaxExtension: got.MaxExtension, Retention: got.Retention}) == want {
			continue
		}
		if gs, err := c.host.Status(h.group); err != nil || gs.Leader != c.node || !h.configuring.CompareAndSwap(false, true) {
			continue
		}
		if !c.background(func(ctx context.Context) {
			defer h.configuring.Store(false)
			cctx, cancel := context.WithTimeout(ctx, replTimeout)
			defer cancel()
			if err := h.q.Configure(cctx, want); err != nil {
				c.log.Warn("cluster: a queue's new retention or extension limit is not applied yet; retrying",
					"queue", h.name, "err", err)
			}
		}) {
			h.configuring.Store(false)
		}
	}
}
