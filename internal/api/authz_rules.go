package api

import (
	"github.com/sluice-mq/sluice/internal/auth"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// need is one permission a call requires: op on res.
type need struct {
	op  auth.Operation
	res auth.Resource
}

func (n need) String() string { return string(n.op) + " " + n.res.String() }

// How a call is authorized once its caller is known.
type policy int

const (
	// checked: the needs listed are all the call requires.
	checked policy = iota
	// filtered: a listing any authenticated principal may make; the handler
	// leaves out what the principal may not describe.
	filtered
	// lookedUp: the resource is known only after a read of the broker (a
	// redrive by id); the handler checks it before acting.
	lookedUp
	// unknown: a message this table does not know. Refused: a new RPC is
	// closed until someone decides what it needs.
	unknown
)

func queueRes(name string) auth.Resource {
	// A subscription "<topic>/<sub>" is a cursor over the topic: what a
	// principal may do to it is what it may do to the topic, as a Kafka
	// consumer needs READ on the topic it reads.
	if topic, _, ok := splitSub(name); ok {
		return auth.Resource{Kind: auth.Topic, Name: topic}
	}
	return auth.Resource{Kind: auth.Queue, Name: name}
}

func topicRes(name string) auth.Resource { return auth.Resource{Kind: auth.Topic, Name: name} }
func groupRes(name string) auth.Resource { return auth.Resource{Kind: auth.Group, Name: name} }

func on(op auth.Operation, res auth.Resource) []need { return []need{{op, res}} }

// requirements maps every request message of proto/sluice/v1 onto the
// operations and resources it needs (docs/security.md, "Native API", has
// this table for people). TestEveryRPCHasARule fails when an RPC is added
// without a line here.
func requirements(msg any) ([]need, policy) {
	switch m := msg.(type) {
	// QueueService. Queue names may be subscriptions (queueRes).
	case *sluicev1.CreateQueueRequest:
		return on(auth.Create, queueRes(m.GetName())), checked
	case *sluicev1.GetQueueRequest:
		return on(auth.Describe, queueRes(m.GetName())), checked
	case *sluicev1.ListQueuesRequest:
		return nil, filtered
	case *sluicev1.UpdateQueueRequest:
		return on(auth.Alter, queueRes(m.GetName())), checked
	case *sluicev1.DeleteQueueRequest:
		return on(auth.Delete, queueRes(m.GetName())), checked
	case *sluicev1.PurgeQueueRequest:
		return on(auth.Delete, queueRes(m.GetQueue())), checked
	case *sluicev1.SendRequest:
		return on(auth.Produce, queueRes(m.GetQueue())), checked
	case *sluicev1.SendBatchRequest:
		return on(auth.Produce, queueRes(m.GetQueue())), checked
	case *sluicev1.ReceiveRequest:
		return on(auth.Consume, queueRes(m.GetQueue())), checked
	case *sluicev1.ConsumeRequest:
		return on(auth.Consume, queueRes(m.GetQueue())), checked
	case *sluicev1.AckRequest:
		return on(auth.Consume, queueRes(m.GetQueue())), checked
	case *sluicev1.AckBatchRequest:
		return on(auth.Consume, queueRes(m.GetQueue())), checked
	case *sluicev1.ExtendRequest:
		return on(auth.Consume, queueRes(m.GetQueue())), checked
	case *sluicev1.NackRequest:
		return on(auth.Consume, queueRes(m.GetQueue())), checked
	case *sluicev1.PeekRequest:
		// Changes nothing, but reads bodies: what a consumer may read.
		return on(auth.Consume, queueRes(m.GetQueue())), checked

	// DeadLetterService.
	case *sluicev1.ListDeadLetterSourcesRequest:
		return on(auth.Describe, queueRes(m.GetQueue())), checked
	case *sluicev1.StartRedriveRequest:
		n := on(auth.Redrive, queueRes(m.GetDeadLetterQueue()))
		if d := m.GetDestinationQueue(); d != "" {
			// Moving messages into a queue is sending to it. Without a
			// destination they go back where they came from, which the
			// redrive right on the dead-letter queue covers.
			n = append(n, need{auth.Produce, queueRes(d)})
		}
		return n, checked
	case *sluicev1.PreviewRedriveRequest:
		// Shows a sample of what would move: whoever may move it may see it.
		return on(auth.Redrive, queueRes(m.GetDeadLetterQueue())), checked
	case *sluicev1.GetRedriveRequest, *sluicev1.CancelRedriveRequest:
		return nil, lookedUp
	// StreamService: each Publish request names its own destination and is
	// answered PERMISSION_DENIED by itself (the stream goes on); a Consume
	// stream's start needs consume on its queue, its acks the same.
	case *sluicev1.PublishRequest, *sluicev1.StreamServiceConsumeRequest:
		return nil, lookedUp
	case *sluicev1.ListRedrivesRequest:
		if q := m.GetDeadLetterQueue(); q != "" {
			return on(auth.Describe, queueRes(q)), checked
		}
		return nil, filtered

	// TopicService.
	case *sluicev1.CreateTopicRequest:
		return on(auth.Create, topicRes(m.GetName())), checked
	case *sluicev1.ListTopicsRequest:
		return nil, filtered
	case *sluicev1.DescribeTopicRequest:
		return on(auth.Describe, topicRes(m.GetName())), checked
	case *sluicev1.DeleteTopicRequest:
		return on(auth.Delete, topicRes(m.GetName())), checked
	case *sluicev1.AddPartitionsRequest:
		return on(auth.Alter, topicRes(m.GetTopic())), checked
	case *sluicev1.InitProducerRequest:
		// A producer id names no topic; every Produce with it is checked.
		return nil, checked
	case *sluicev1.ProduceRequest:
		return on(auth.Produce, topicRes(m.GetTopic())), checked
	case *sluicev1.FetchRequest:
		return on(auth.Consume, topicRes(m.GetTopic())), checked
	case *sluicev1.ListOffsetsRequest:
		return on(auth.Describe, topicRes(m.GetTopic())), checked
	case *sluicev1.CreateSubscriptionRequest:
		return on(auth.Create, topicRes(m.GetTopic())), checked
	case *sluicev1.GetSubscriptionRequest:
		return on(auth.Describe, topicRes(m.GetTopic())), checked
	case *sluicev1.ListSubscriptionsRequest:
		return on(auth.Describe, topicRes(m.GetTopic())), checked
	case *sluicev1.DeleteSubscriptionRequest:
		return on(auth.Delete, topicRes(m.GetTopic())), checked

	// GroupService: membership and commits are consuming, on the group and
	// on every topic named, as Kafka asks READ on both.
	case *sluicev1.JoinGroupRequest:
		n := on(auth.Consume, groupRes(m.GetGroup()))
		for _, t := range m.GetTopics() {
			n = append(n, need{auth.Consume, topicRes(t)})
		}
		return n, checked
	case *sluicev1.HeartbeatRequest:
		return on(auth.Consume, groupRes(m.GetGroup())), checked
	case *sluicev1.LeaveGroupRequest:
		return on(auth.Consume, groupRes(m.GetGroup())), checked
	case *sluicev1.CommitOffsetsRequest:
		n := on(auth.Consume, groupRes(m.GetGroup()))
		for _, o := range m.GetOffsets() {
			n = append(n, need{auth.Consume, topicRes(o.GetTopic())})
		}
		return n, checked
	case *sluicev1.FetchOffsetsRequest:
		n := on(auth.Describe, groupRes(m.GetGroup()))
		for _, p := range m.GetPartitions() {
			n = append(n, need{auth.Describe, topicRes(p.GetTopic())})
		}
		return n, checked
	case *sluicev1.ListGroupsRequest:
		return nil, filtered
	case *sluicev1.DescribeGroupRequest:
		return on(auth.Describe, groupRes(m.GetGroup())), checked
	case *sluicev1.ResetOffsetsRequest:
		// Moving a group's position is an operator's change to the group,
		// not a consumer's progress.
		return []need{{auth.Alter, groupRes(m.GetGroup())}, {auth.Describe, topicRes(m.GetTopic())}}, checked
	}
	return nil, unknown
}
