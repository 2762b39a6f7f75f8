package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/group"
)

// ConsumerGroups returns the KIP-848 settings for the broker, or the
// first invalid one as a one-line error naming its flag.
func (c Config) ConsumerGroups() (broker.ConsumerGroupConfig, error) {
	cg := broker.ConsumerGroupConfig{SessionTimeout: c.ConsumerGroupSessionTimeout, HeartbeatInterval: c.ConsumerGroupHeartbeatInterval}
	if cg.SessionTimeout <= 0 {
		return cg, fmt.Errorf("--group-consumer-session-timeout: must be positive, got %s", cg.SessionTimeout)
	}
	if cg.HeartbeatInterval <= 0 || cg.HeartbeatInterval >= cg.SessionTimeout {
		return cg, fmt.Errorf("--group-consumer-heartbeat-interval: must be positive and less than the session timeout (%s), got %s", cg.SessionTimeout, cg.HeartbeatInterval)
	}
	for _, a := range strings.Split(c.ConsumerGroupAssignors, ",") {
		a = strings.TrimSpace(a)
		if !slices.Contains(group.ConsumerAssignors, a) {
			return cg, fmt.Errorf("--group-consumer-assignors: %q is not one of %s", a, strings.Join(group.ConsumerAssignors, ", "))
		}
		if !slices.Contains(cg.Assignors, a) {
			cg.Assignors = append(cg.Assignors, a)
		}
	}
	return cg, nil
}
