package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// CreateTopic creates a topic; cfg may be nil for the defaults.
func (c *Client) CreateTopic(ctx context.Context, name string, cfg *TopicConfig) (*Topic, error) {
	res, err := call(ctx, c.topic.CreateTopic, &sluicev1.CreateTopicRequest{Name: name, Config: cfg})
	return res.GetTopic(), err
}

// ListTopics returns every topic whose name starts with prefix.
func (c *Client) ListTopics(ctx context.Context, prefix string) ([]*Topic, error) {
	var out []*Topic
	token := ""
	for {
		res, err := call(ctx, c.topic.ListTopics, &sluicev1.ListTopicsRequest{Prefix: prefix, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		out = append(out, res.GetTopics()...)
		if token = res.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// DescribeTopic returns a topic's config, partitions and subscriptions.
func (c *Client) DescribeTopic(ctx context.Context, name string) (*Topic, error) {
	res, err := call(ctx, c.topic.DescribeTopic, &sluicev1.DescribeTopicRequest{Name: name})
	return res.GetTopic(), err
}

// DeleteTopic deletes a topic with its records, subscriptions and offsets.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	_, err := call(ctx, c.topic.DeleteTopic, &sluicev1.DeleteTopicRequest{Name: name})
	return err
}

// AddPartitions raises a topic's partition count to partitions.
func (c *Client) AddPartitions(ctx context.Context, topic string, partitions int32) (*Topic, error) {
	res, err := call(ctx, c.topic.AddPartitions, &sluicev1.AddPartitionsRequest{Topic: topic, Partitions: partitions})
	return res.GetTopic(), err
}

// InitProducer returns a producer id and epoch for idempotent produce;
// the same name again fences the previous holder.
func (c *Client) InitProducer(ctx context.Context, name string) (id int64, epoch int32, err error) {
	res, err := call(ctx, c.topic.InitProducer, &sluicev1.InitProducerRequest{ProducerName: name})
	return res.GetProducerId(), res.GetProducerEpoch(), err
}

// Produce appends records and returns where each landed, once durable.
// idem may be nil.
func (c *Client) Produce(ctx context.Context, topic string, records []*ProduceRecord, idem *Idempotence) ([]*ProduceResult, error) {
	res, err := call(ctx, c.topic.Produce, &sluicev1.ProduceRequest{Topic: topic, Records: records, Idempotence: idem})
	return res.GetResults(), err
}

// OffsetsAt is ListOffsets for the first offsets at or after t.
func (c *Client) OffsetsAt(ctx context.Context, topic string, t time.Time) ([]*PartitionOffsetResult, error) {
	return c.ListOffsets(ctx, &ListOffsetsRequest{Topic: topic, Spec: &sluicev1.ListOffsetsRequest_Time{Time: timestamppb.New(t)}})
}

// CreateSubscription adds a fan-out subscription to a topic; read it as the
// queue "<topic>/<name>".
func (c *Client) CreateSubscription(ctx context.Context, topic, name string, cfg *SubscriptionConfig) (*Subscription, error) {
	res, err := call(ctx, c.topic.CreateSubscription, &sluicev1.CreateSubscriptionRequest{Topic: topic, Name: name, Config: cfg})
	return res.GetSubscription(), err
}

// GetSubscription returns a subscription's config and stats.
func (c *Client) GetSubscription(ctx context.Context, topic, name string) (*Subscription, error) {
	res, err := call(ctx, c.topic.GetSubscription, &sluicev1.GetSubscriptionRequest{Topic: topic, Name: name})
	return res.GetSubscription(), err
}

// ListSubscriptions lists a topic's subscriptions.
func (c *Client) ListSubscriptions(ctx context.Context, topic string) ([]*Subscription, error) {
	res, err := call(ctx, c.topic.ListSubscriptions, &sluicev1.ListSubscriptionsRequest{Topic: topic})
	return res.GetSubscriptions(), err
}

// DeleteSubscription deletes a subscription and its cursor.
func (c *Client) DeleteSubscription(ctx context.Context, topic, name string) error {
	_, err := call(ctx, c.topic.DeleteSubscription, &sluicev1.DeleteSubscriptionRequest{Topic: topic, Name: name})
	return err
}
