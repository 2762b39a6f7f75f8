package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleCreateTopics creates topics. A one-node cluster can only hold one
// replica, so a replication factor above 1 is refused, as Kafka refuses
// one larger than its broker count.
func handleCreateTopics(_ context.Context, c *conn, req *kmsg.CreateTopicsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		if !c.mayCreate(t.Topic) {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		s, code, err := c.createTopic(t, req.ValidateOnly)
		rt.ErrorCode, rt.ErrorMessage = code, errMessage(err)
		if code == 0 {
			rt.TopicID = topicID(s)
			rt.NumPartitions, rt.ReplicationFactor = s.Partitions, int16(max(1, s.Replication))
			rt.Configs = createdConfigs(s, withDefaults(s, c.s.b))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}

// mayCreate: create on the cluster (any topic) or on the topic, as Kafka.
func (c *conn) mayCreate(topic string) bool {
	return c.mayCluster(auth.Create) || c.may(auth.Create, auth.Topic, topic)
}

func (c *conn) createTopic(t kmsg.CreateTopicsRequestTopic, validateOnly bool) (broker.TopicSettings, int16, error) {
	s := broker.TopicSettings{Name: t.Topic, Partitions: t.NumPartitions}
	switch {
	case !validTopicName(t.Topic):
		return s, kerr.InvalidTopicException.Code, fmt.Errorf("invalid topic name %q", t.Topic)
	case len(t.ReplicaAssignment) > 0:
		return s, kerr.InvalidReplicaAssignment.Code, errors.New("manual replica assignment is not supported")
	case t.ReplicationFactor > 1 && !c.s.b.Clustered():
		return s, kerr.InvalidReplicationFactor.Code, fmt.Errorf("replication factor %d: this cluster has one node", t.ReplicationFactor)
	case t.ReplicationFactor == 0 || t.ReplicationFactor < -1:
		return s, kerr.InvalidReplicationFactor.Code, fmt.Errorf("replication factor %d", t.ReplicationFactor)
	case t.NumPartitions == 0 || t.NumPartitions < -1:
		return s, kerr.InvalidPartitions.Code, fmt.Errorf("%d partitions", t.NumPartitions)
	}
	if s.Partitions == -1 {
		s.Partitions = c.s.cfg.DefaultPartitions
	}
	if t.ReplicationFactor > 0 {
		s.Replication = int(t.ReplicationFactor) // -1: the cluster's default (docs/cluster.md)
	}
	if err := applyTopicConfigs(&s, t.Configs); err != nil {
		return s, kerr.InvalidConfig.Code, err
	}
	if validateOnly {
		if _, err := c.s.b.DescribeTopic(t.Topic); err == nil {
			return s, kerr.TopicAlreadyExists.Code, fmt.Errorf("topic %q already exists", t.Topic)
		}
		return s, 0, nil
	}
	created, err := c.s.b.CreateTopic(s)
	if err != nil {
		var ia *broker.InvalidArgumentError
		if errors.As(err, &ia) && ia.Field == "partitions" {
			return s, kerr.InvalidPartitions.Code, err
		}
		if errors.As(err, &ia) && ia.Field == "replication_factor" {
			return s, kerr.InvalidReplicationFactor.Code, err
		}
		if errors.As(err, &ia) && ia.Field == "name" { // reserved names (__*)
			return s, kerr.InvalidTopicException.Code, err
		}
		return s, errCode(err, kerr.InvalidConfig), err
	}
	return created, 0, nil
}

// createdConfigs is CreateTopics v5's echo of the new topic's configs.
func createdConfigs(s, eff broker.TopicSettings) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, tc := range topicConfigs {
		v := tc.get(eff)
		cfg := kmsg.NewCreateTopicsResponseTopicConfig()
		cfg.Name, cfg.Value = tc.name, &v
		cfg.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		if tc.isDef(s) {
			cfg.Source = int8(kmsg.ConfigSourceDefaultConfig)
		}
		out = append(out, cfg)
	}
	return out
}
