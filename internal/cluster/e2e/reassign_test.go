package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
)

// TestReassignThroughKafka: kadm's AlterPartitionReassignments and
// ListPartitionReassignments against three processes. A partition on two nodes is moved to
// one replica on the third, which held none of it; once the list is empty, Metadata names
// it alone, and with the two others SIGKILLed every record produced before the move is read
// from it. A queue on all three goes to one node alone with "sluice cluster reassign
// --queue" and serves what was sent before. Both are pinned where they were put. On main a cluster node answered "this cluster
// has one node", and a queue's replicas could not change.
func TestReassignThroughKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "moved", 1, 2)
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Topic: "moved", Value: []byte(strconv.Itoa(i))})
	}
	if err := c.client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, "moved")
	if err != nil {
		t.Fatal(err)
	}
	had := md.Topics["moved"].Partitions[0].Replicas
	spare := int32(0)
	for id := int32(1); id <= 3; id++ {
		if id != had[0] && id != had[1] {
			spare = id
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moved", 0, []int32{spare})
	for {
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("reassign moved/0 from %v to [%d]: %v", had, spare, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		// Named: kadm sends nothing for a nil set and answers empty (this loop was vacuous).
		moving, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moved": {0: {}}})
		if err == nil && len(moving["moved"]) == 0 {
			if md, err := adm.Metadata(ctx, "moved"); err == nil {
				if p := md.Topics["moved"].Partitions[0]; len(p.Replicas) == 1 && p.Replicas[0] == spare && p.Leader == spare {
					break
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("moved/0 still moving to node %d: %v %v", spare, moving, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("moved/0 moved from %v to [%d]", had, spare)
	var cancelReq kadm.AlterPartitionAssignmentsReq // nothing moving: nothing to cancel
	cancelReq.CancelAssign("moved", 0)
	if res, err := adm.AlterPartitionAssignments(ctx, cancelReq); err != nil || !errors.Is(res.Error(), kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel with nothing moving: %v %v, want NO_REASSIGNMENT_IN_PROGRESS", err, res.Error())
	}
	var st broker.ClusterStatus // the reassigned partition is pinned where it was put
	if err := json.Unmarshal([]byte(c.cli(t, int(spare), "cluster", "status", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(st.Partitions, func(r broker.ReplicaState) bool { return r.Topic == "moved" }); i < 0 || !st.Partitions[i].Pinned {
		t.Fatalf("cluster status on node %d lists %+v, want moved/0 pinned", spare, st.Partitions)
	}

	// The queue (on all three) goes to one of the others alone: both moves are pinned, so
	// the rebalance (which evens counts differing by more than one) leaves them be.
	sq := c.sqsClient(ctx, t, int(spare))
	qurl := createQueue(ctx, t, sq, "movedq", 30)
	for i := range 5 {
		if _, err := sq.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(qurl), MessageBody: aws.String(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if out := c.cli(t, int(spare), "cluster", "reassign", "--queue", "movedq", "--replicas", itoa(int(had[0])), "--wait", "60s"); !strings.Contains(out, "queue movedq is on nodes "+itoa(int(had[0]))) {
		t.Fatalf("sluice cluster reassign --queue: %s", out)
	}
	got := map[string]bool{}
	for len(got) < 5 {
		out, err := sq.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(qurl), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if ctx.Err() != nil {
			t.Fatalf("received %d of 5 messages from the queue on node %d alone", len(got), had[0])
		}
		if err == nil {
			for _, m := range out.Messages {
				got[aws.ToString(m.Body)] = true
			}
		}
	}
	c.kill(int(had[0]))
	c.kill(int(had[1]))
	cons := c.client(kgo.ConsumeTopics("moved"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < 50 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 50 records from node %d alone", len(seen), spare)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}
