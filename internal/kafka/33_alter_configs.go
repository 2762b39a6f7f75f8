package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// handleAlterConfigs replaces a topic's configs: those listed take their
// values (null: the default), every other one returns to its default, as
// in Kafka's (deprecated, non-incremental) AlterConfigs. Refusals and
// authorization are IncrementalAlterConfigs' (alterConfigs).
func handleAlterConfigs(_ context.Context, c *conn, req *kmsg.AlterConfigsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		rr.ErrorCode, rr.ErrorMessage = c.alterConfigs(r.ResourceType, r.ResourceName, req.ValidateOnly, func(s *broker.TopicSettings) error {
			for _, tc := range topicConfigs {
				tc.reset(s)
			}
			for _, cfg := range r.Configs {
				var err error
				if cfg.Value == nil {
					err = resetTopicConfig(s, cfg.Name)
				} else {
					err = setTopicConfig(s, cfg.Name, *cfg.Value)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		resp.Resources = append(resp.Resources, rr)
	}
	return msg(resp)
}
