package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// TestRedriveTasksThroughAnyNode: a message move task runs on its dead-letter queue's
// leader and is saved there. Asked of any node, the native ListRedrives lists it (every
// node is asked), GetRedrive finds it and CancelRedrive cancels it (its id names the node,
// and the call is forwarded there), and SQS's ListMessageMoveTasks lists it (forwarded to
// the queue's leader). Before, all four answered from the node asked: nothing, or
// NOT_FOUND, on two nodes of three.
func TestRedriveTasksThroughAnyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	// With the users file of the other tests: the native client's token, SQS's access key.
	users := filepath.Join(t.TempDir(), "users.yaml")
	file := strings.Replace(usersFile, "access_keys:", "tokens: ["+nativeToken+"]\n    access_keys:", 1)
	if err := os.WriteFile(users, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, "--auth-file", users)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.awaitRegistered(ctx, t, 3)
	for _, q := range []string{"parked", "work"} {
		createQueue(ctx, t, c.sqsClient(ctx, t, 1), q, 30)
	}
	dlq := c.native(1)
	for i := range 20 {
		if _, err := dlq.Send(ctx, "parked", []byte(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.queueLeader(ctx, t, "parked")
	via := leader%3 + 1 // a node that does not lead the dead-letter queue
	task, err := c.native(via).StartRedrive(ctx, &client.StartRedriveRequest{
		DeadLetterQueue: "parked", DestinationQueue: "work", MaxPerSecond: 1})
	if err != nil {
		t.Fatalf("start through node %d (node %d leads): %v", via, leader, err)
	}
	t.Logf("task %s started through node %d, runs on node %d", task.GetId(), via, leader)

	for id := 1; id <= 3; id++ {
		nc := c.native(id)
		list, err := nc.ListRedrives(ctx, "")
		if err != nil || len(list) != 1 || list[0].GetId() != task.GetId() {
			t.Errorf("node %d lists %v (%v), want the one task", id, ids(list), err)
		}
		list, err = nc.ListRedrives(ctx, "parked")
		if err != nil || len(list) != 1 {
			t.Errorf("node %d lists for the queue %v (%v), want the one task", id, ids(list), err)
		}
		got, err := nc.GetRedrive(ctx, task.GetId())
		if err != nil || got.GetState() != sluicev1.RedriveState_REDRIVE_STATE_RUNNING {
			t.Errorf("node %d gets the task: %v (%v)", id, got.GetState(), err)
		}
		out, err := c.sqsClient(ctx, t, id).ListMessageMoveTasks(ctx, &awssqs.ListMessageMoveTasksInput{
			SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:parked")})
		switch {
		case err != nil:
			t.Errorf("node %d's SQS ListMessageMoveTasks: %v", id, err)
		case len(out.Results) != 1 || aws.ToString(out.Results[0].TaskHandle) != task.GetId():
			t.Errorf("node %d's SQS lists %d tasks, want the running one", id, len(out.Results))
		}
	}
	cancelVia := via%3 + 1 // the third node: neither the leader nor the one that started it
	if _, err := c.native(cancelVia).CancelRedrive(ctx, task.GetId()); err != nil {
		t.Fatalf("cancel through node %d: %v", cancelVia, err)
	}
	got, err := c.native(via).GetRedrive(ctx, task.GetId())
	if err != nil || got.GetState() != sluicev1.RedriveState_REDRIVE_STATE_CANCELLED {
		t.Errorf("after the cancel, node %d says %v (%v)", via, got.GetState(), err)
	}
	if _, err := c.native(via).GetRedrive(ctx, "0123456789abcdef-n9"); err == nil {
		t.Error("a task id naming no member was found")
	}
}

func ids(rs []*client.Redrive) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.GetId()+" "+r.GetState().String())
	}
	return out
}
