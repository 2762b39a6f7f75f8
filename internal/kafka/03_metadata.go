package kafka

import (
	"context"
	"crypto/sha256"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// handleMetadata describes this one-node cluster: every partition's leader
// is this node, at leader epoch 0 (there is no replication yet), and this
// node is the controller. As in Kafka, a listing of all topics leaves out
// those the principal may not describe, a named one answers
// TOPIC_AUTHORIZATION_FAILED, and auto-creation needs create on the topic
// or the cluster (without it a missing topic is UNKNOWN_TOPIC_OR_PARTITION).
func handleMetadata(_ context.Context, c *conn, req *kmsg.MetadataRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = c.brokers()
	resp.ClusterID = &c.s.cfg.ClusterID
	resp.ControllerID = c.controller()
	// v0 has no way to say "all topics" but an empty list; v1+ uses null.
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, ts := range c.s.b.ListTopics("") {
			if c.sees(auth.Topic, ts.Name) {
				resp.Topics = append(resp.Topics, c.topicMetadata(ts.Name))
			}
		}
		return msg(resp)
	}
	autoCreate := c.s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, t := range req.Topics {
		if t.Topic == nil {
			// A lookup by topic id alone (v10+): we do not index ids, so
			// search the few topics a node holds.
			resp.Topics = append(resp.Topics, c.topicMetadataByID(t.TopicID))
			continue
		}
		if !c.may(auth.Describe, auth.Topic, *t.Topic) {
			resp.Topics = append(resp.Topics, deniedTopic(*t.Topic))
			continue
		}
		var refused error
		if autoCreate && c.mayCreateQuiet(*t.Topic) {
			refused = c.autoCreate(*t.Topic)
		}
		mt := c.topicMetadata(*t.Topic)
		var ia *broker.InvalidArgumentError
		if mt.ErrorCode == kerr.UnknownTopicOrPartition.Code && errors.As(refused, &ia) {
			// A name auto-creation refuses (a reserved "__" prefix) is the client's
			// mistake to be told at once, not a topic to wait for: INVALID_TOPIC_EXCEPTION
			// fails its produce, where UNKNOWN_TOPIC_OR_PARTITION has it retry until its
			// own timeout.
			mt.ErrorCode = kerr.InvalidTopicException.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return msg(resp)
}

// autoCreate creates a topic a client asked for, when allowed, and returns why not if
// it could not (nil if it exists). A failure shows up as the topic's error in the
// metadata that follows.
func (c *conn) autoCreate(name string) error {
	_, err := c.s.b.CreateTopic(broker.TopicSettings{Name: name, Partitions: c.s.cfg.DefaultPartitions})
	if err != nil && !errors.Is(err, broker.ErrTopicExists) {
		c.s.log.Info("auto-create topic failed", "topic", name, "err", err)
		return err
	}
	return nil
}

func deniedTopic(name string) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.ErrorCode = &name, kerr.TopicAuthorizationFailed.Code
	return t
}

func (c *conn) mayCreateQuiet(topic string) bool {
	return c.mayCluster(auth.Create) || c.mayQuiet(auth.Create, auth.Topic, topic)
}

func (c *conn) topicMetadata(name string) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = &name
	info, err := c.s.b.DescribeTopic(name)
	if err != nil {
		t.ErrorCode = errCode(err, nil)
		var ia *broker.InvalidArgumentError
		if errors.As(err, &ia) || !validTopicName(name) {
			t.ErrorCode = kerr.InvalidTopicException.Code
		}
		return t
	}
	t.TopicID = topicID(info.Settings)
	for _, p := range info.Partitions {
		t.Partitions = append(t.Partitions, c.partitionMetadata(name, p.Partition))
	}
	return t
}

func (c *conn) topicMetadataByID(id [16]byte) kmsg.MetadataResponseTopic {
	for _, ts := range c.s.b.ListTopics("") {
		if topicID(ts) == id && c.sees(auth.Topic, ts.Name) {
			return c.topicMetadata(ts.Name)
		}
	}
	t := kmsg.NewMetadataResponseTopic()
	t.TopicID = id
	t.ErrorCode = kerr.UnknownTopicID.Code
	return t
}

// topicID derives a topic's Kafka UUID from its name and the broker's
// never-reused topic id, so a topic deleted and created again gets a new
// one, as in Kafka. It is never the all-zero UUID, which means "none".
func topicID(ts broker.TopicSettings) [16]byte {
	if ts.UUID != ([16]byte{}) {
		return ts.UUID // a cluster's topic: the catalog's id, the same on every node
	}
	h := sha256.New()
	h.Write([]byte(ts.Name))
	var n [8]byte
	for i := range n {
		n[i] = byte(ts.ID >> (8 * i))
	}
	h.Write(n[:])
	var id [16]byte
	copy(id[:], h.Sum(nil))
	id[0] |= 1
	return id
}

// validTopicName is Kafka's rule: 1-249 of [A-Za-z0-9._-], not "." or "..".
func validTopicName(s string) bool {
	if len(s) == 0 || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		ok := r == '.' || r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
