package kafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// seedConsumerGroup are populated KIP-848 requests: joins by name and by
// regex, a heartbeat owning partitions, leaves, a describe.
func seedConsumerGroup() []seedRequest {
	inst, re, assignor := "pod-0", "f.*", "range"
	hb := func(v int16, mod func(*kmsg.ConsumerGroupHeartbeatRequest)) seedRequest {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = v, "fg", "m1", 30000
		req.SubscribedTopicNames, req.Topics = []string{"fz"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		mod(req)
		return seedRequest{68, v, req.AppendTo(nil)}
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Version, d.Groups = 1, []string{"fg", "", "nope"}
	return []seedRequest{
		hb(1, func(*kmsg.ConsumerGroupHeartbeatRequest) {}),
		hb(0, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }),
		hb(1, func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberID, r.InstanceID, r.SubscribedTopicNames, r.SubscribedTopicRegex, r.ServerAssignor = "m2", &inst, nil, &re, &assignor
		}),
		hb(1, func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberEpoch, r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 1, -1, nil
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: [16]byte{1}, Partitions: []int32{0, 1}}}
		}),
		hb(1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 }),
		hb(1, func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.MemberEpoch, r.InstanceID = "m2", -2, &inst }),
		{69, 1, d.AppendTo(nil)},
	}
}

// FuzzConsumerGroupHeartbeat runs arbitrary ConsumerGroupHeartbeat and
// ConsumerGroupDescribe bodies through decoding, the handler and the
// coordinator, against one broker whose groups carry over from input to
// input, so later inputs meet members earlier ones made. After each, no
// partition may be assigned to two members of a group.
func FuzzConsumerGroupHeartbeat(f *testing.F) {
	for _, s := range seedConsumerGroup() {
		f.Add(s.key == 69, s.version, s.body)
	}
	b, err := broker.Open(broker.Options{Dir: f.TempDir(), Logger: quietLogger(), Sync: broker.SyncPolicy{Mode: broker.SyncNever}})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(broker.TopicSettings{Name: "fz", Partitions: 3}); err != nil {
		f.Fatal(err)
	}
	srv := New(b, Config{Logger: quietLogger(), AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092})
	f.Fuzz(func(t *testing.T, describe bool, version int16, body []byte) {
		key := int16(68)
		if describe {
			key = 69
		}
		version = int16(uint16(version) % 2)
		ours, theirs := net.Pipe()
		go io.Copy(io.Discard, theirs)
		err := newConn(srv, ours).handle(frameOf(key, version, body))
		ours.Close()
		if errors.Is(err, errHandlerPanic) {
			t.Fatal(err)
		}
		for _, g := range b.ListGroups() {
			info, _ := b.DescribeGroup(g.Group)
			owner := map[string]string{}
			for _, m := range info.Members {
				for _, tp := range m.Partitions {
					for _, p := range tp.Partitions {
						k := fmt.Sprintf("%s/%d", tp.Topic, p)
						if o, ok := owner[k]; ok && o != m.MemberID {
							t.Fatalf("group %s: %s assigned to %s and %s", g.Group, k, o, m.MemberID)
						}
						owner[k] = m.MemberID
					}
				}
			}
		}
	})
}
