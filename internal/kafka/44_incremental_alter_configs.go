package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// IncrementalAlterConfigs operations (KIP-339).
const (
	opSet      = 0
	opDelete   = 1
	opAppend   = 2
	opSubtract = 3
)

// handleIncrementalAlterConfigs changes the listed topic configs and
// leaves the others; each resource is all or nothing (one bad config
// refuses the resource with INVALID_CONFIG and changes none of it), and
// validate_only checks without storing. Broker configs are set by flags at
// start: POLICY_VIOLATION. It needs alter on the topic (on the cluster for
// a broker resource).
func handleIncrementalAlterConfigs(_ context.Context, c *conn, req *kmsg.IncrementalAlterConfigsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if r.ResourceType == kmsg.ConfigResourceTypeGroupConfig {
			rr.ErrorCode, rr.ErrorMessage = c.alterGroupConfigs(r.ResourceName, r.Configs, req.ValidateOnly)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		rr.ErrorCode, rr.ErrorMessage = c.alterConfigs(r.ResourceType, r.ResourceName, req.ValidateOnly, func(s *broker.TopicSettings) error {
			for _, cfg := range r.Configs {
				if err := incrementalAlter(s, cfg); err != nil {
					return err
				}
			}
			return nil
		})
		resp.Resources = append(resp.Resources, rr)
	}
	return msg(resp)
}

// incrementalAlter applies one operation. Only cleanup.policy is a list
// (APPEND and SUBTRACT), as in Kafka.
func incrementalAlter(s *broker.TopicSettings, cfg kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	value := ""
	if cfg.Value != nil {
		value = *cfg.Value
	}
	switch cfg.Op {
	case opSet:
		if cfg.Value == nil {
			return fmt.Errorf("config %s: SET needs a value", cfg.Name)
		}
		return setTopicConfig(s, cfg.Name, value)
	case opDelete:
		return resetTopicConfig(s, cfg.Name)
	case opAppend, opSubtract:
		if cfg.Name != "cleanup.policy" {
			return fmt.Errorf("config %s is not a list: APPEND and SUBTRACT apply to lists only", cfg.Name)
		}
		list := strings.Split(s.CleanupPolicy, ",")
		for _, v := range strings.Split(value, ",") {
			if cfg.Op == opAppend && !slices.Contains(list, v) {
				list = append(list, v)
			}
			if cfg.Op == opSubtract {
				list = slices.DeleteFunc(list, func(x string) bool { return x == v })
			}
		}
		if len(list) == 0 {
			return errors.New("cleanup.policy: an empty policy keeps records forever; sluice needs \"delete\", \"compact\" or both")
		}
		return setTopicConfig(s, cfg.Name, strings.Join(list, ","))
	}
	return fmt.Errorf("config %s: unknown operation %d", cfg.Name, cfg.Op)
}

// alterConfigs authorizes and applies fn to one resource of AlterConfigs
// or IncrementalAlterConfigs, answering its error code and message.
func (c *conn) alterConfigs(typ kmsg.ConfigResourceType, name string, validateOnly bool, fn func(*broker.TopicSettings) error) (int16, *string) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !c.may(auth.Alter, auth.Topic, name) {
			return kerr.TopicAuthorizationFailed.Code, nil
		}
	case kmsg.ConfigResourceTypeBroker:
		if !c.may(auth.Alter, auth.Cluster, "") {
			return kerr.ClusterAuthorizationFailed.Code, nil
		}
		m := "sluice's broker configs are set by flags at start (docs/operations.md), not at run time"
		return kerr.PolicyViolation.Code, &m
	default:
		m := fmt.Sprintf("resource type %d is not supported", typ)
		return kerr.InvalidRequest.Code, &m
	}
	var refused error
	_, err := c.s.b.UpdateTopic(name, validateOnly, func(s *broker.TopicSettings) error {
		refused = fn(s)
		return refused
	})
	switch {
	case err == nil:
		return 0, nil
	case refused != nil:
		return kerr.InvalidConfig.Code, errMessage(err)
	}
	return errCode(err, kerr.InvalidConfig), errMessage(err)
}
