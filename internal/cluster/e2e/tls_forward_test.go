package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// TestOverTLSThroughFollower: three nodes with mutual TLS between them, an --auth-file,
// and the native API and SQS served over TLS, the native API with a client CA. Clients of a node
// that leads neither the queue nor most partitions, over TLS — a bearer token, and a
// client certificate whose CN (carol) the users file only lets consume — are answered as
// by the leader, in Connect and gRPC: their calls go to the leader over the cluster
// transport, the node naming the caller it authenticated, and the leader's rules still
// apply (carol's Send is refused). A Fetch and a ListOffsets of three partitions led by
// three nodes, made with a plain generated Connect client over TLS through each node,
// answer for all three (fanned out the same way). Before, every one of these answered
// NOT_LEADER: a TLS call was never forwarded. Then the AWS SDK over HTTPS sends, receives
// and deletes through a node that does not lead the queue: forwarded over the cluster
// transport too (the node's streams counter moves), not in clear to the leader's plain
// SQS listener as before.
func TestOverTLSThroughFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	dir := t.TempDir()
	ca, pairs := clusterCA(t, dir, 3)
	carol, err := ca.Issue("carol", "carol", 7)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "users.yaml")
	file := strings.Replace(usersFile, "access_keys:", "tokens: ["+nativeToken+"]\n    access_keys:", 1) +
		"  - {user: carol, allow: [consume], resources: [\"queue:secure\"]}\n"
	if err := os.WriteFile(users, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startClusterEach(t, 3, false, func(id int) []string {
		p := pairs[id]
		return []string{"--cluster-tls-cert", p.Cert, "--cluster-tls-key", p.Key, "--cluster-tls-ca", ca.Cert,
			"--tls-cert", p.Cert, "--tls-key", p.Key, "--http-tls-addr", "127.0.0.1:0", "--tls-client-ca", ca.Cert,
			"--sqs-tls-addr", "127.0.0.1:0"}
	}, "--auth-file", users)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.awaitRegistered(ctx, t, 3)
	for {
		_, err := c.native(1).CreateQueue(ctx, "secure", nil)
		if err == nil || errors.Is(err, client.ErrQueueAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create queue: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	leader := c.queueLeader(ctx, t, "secure")
	via := leader%3 + 1
	tlsCfg := func(p tlstest.Pair) *tls.Config {
		cfg, err := ca.ClientConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	over := func(id int, p tlstest.Pair, opts ...client.Option) *client.Client {
		return client.New("https://"+c.procs[id-1].Addr("http-tls"), append(opts, client.WithTLS(tlsCfg(p)))...)
	}
	t.Logf("queue secure: node %d leads; the TLS clients call node %d", leader, via)

	for _, proto := range []struct {
		name string
		p    client.Protocol
	}{{"connect", client.ProtocolConnect}, {"grpc", client.ProtocolGRPC}} {
		body := "over TLS, " + proto.name
		if _, err := over(via, tlstest.Pair{}, client.WithToken(nativeToken), client.WithProtocol(proto.p)).Send(ctx, "secure", []byte(body)); err != nil {
			t.Fatalf("%s: send with a token over TLS through node %d (node %d leads): %v", proto.name, via, leader, err)
		}
		asCarol := over(via, carol, client.WithProtocol(proto.p))
		msgs, err := asCarol.Receive(ctx, "secure", client.Wait(2*time.Second))
		if err != nil || len(msgs) != 1 || string(msgs[0].GetBody()) != body {
			t.Fatalf("%s: carol's receive over TLS through node %d: %d messages, %v", proto.name, via, len(msgs), err)
		}
		if err := asCarol.Ack(ctx, "secure", msgs[0].GetReceipt()); err != nil {
			t.Fatalf("%s: carol's ack over TLS through node %d: %v", proto.name, via, err)
		}
		if _, err := asCarol.Send(ctx, "secure", []byte("not carol's")); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s: carol's send over TLS through node %d: %v, want permission denied", proto.name, via, err)
		}
	}
	if q, err := c.native(leader).GetQueue(ctx, "secure"); err != nil || q.GetStats().GetVisible()+q.GetStats().GetInFlight() != 0 {
		t.Errorf("the queue at its leader after two sends and two acks: %v, %v; want it empty", q.GetStats(), err)
	}

	// A topic whose three partitions three nodes lead, read through each node over TLS.
	for {
		_, err := c.native(1).CreateTopic(ctx, "tls-spread", &client.TopicConfig{Partitions: 3})
		if err == nil || errors.Is(err, client.ErrTopicAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	leaders := c.spreadLeaders(ctx, t, "tls-spread")
	for p := range int32(3) {
		if _, err := over(via, tlstest.Pair{}, client.WithToken(nativeToken)).Produce(ctx, "tls-spread",
			[]*client.ProduceRecord{{Value: fmt.Appendf(nil, "p%d", p), Partition: &p}}, nil); err != nil {
			t.Fatalf("produce to tls-spread/%d (node %d leads) over TLS through node %d: %v", p, leaders[p], via, err)
		}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg(tlstest.Pair{})}}
	all := []*sluicev1.PartitionOffset{{Partition: 0}, {Partition: 1}, {Partition: 2}}
	for id := 1; id <= 3; id++ {
		plain := sluicev1connect.NewTopicServiceClient(hc, "https://"+c.procs[id-1].Addr("http-tls"))
		f, err := plain.Fetch(ctx, withToken(&sluicev1.FetchRequest{Topic: "tls-spread", MaxWait: durationpb.New(0), Partitions: all}))
		if err != nil {
			t.Fatalf("fetch of three partitions over TLS through node %d: %v", id, err)
		}
		for i, pr := range f.Msg.GetPartitions() {
			if pr.GetError() != nil || len(pr.GetRecords()) != 1 || string(pr.GetRecords()[0].GetValue()) != fmt.Sprintf("p%d", i) {
				t.Errorf("fetch over TLS through node %d: partition %d (node %d leads) answered %v", id, i, leaders[i], pr)
			}
		}
		o, err := plain.ListOffsets(ctx, withToken(&sluicev1.ListOffsetsRequest{Topic: "tls-spread",
			Spec: &sluicev1.ListOffsetsRequest_Latest{Latest: true}}))
		if err != nil || len(o.Msg.GetPartitions()) != 3 {
			t.Fatalf("list offsets over TLS through node %d: %v", id, err)
		}
		for i, r := range o.Msg.GetPartitions() {
			if r.GetOffset() != 1 {
				t.Errorf("list offsets over TLS through node %d: partition %d at %d, want 1", id, i, r.GetOffset())
			}
		}
	}
	checkSQSOverTLS(ctx, t, c, tlsCfg(tlstest.Pair{}))
	checkListQueuesAcrossLeaders(ctx, t, c, map[string]func(int) *client.Client{
		"plain": c.native,
		"TLS":   func(id int) *client.Client { return over(id, tlstest.Pair{}, client.WithToken(nativeToken)) },
	})
}

// checkListQueuesAcrossLeaders: with queues led by three nodes, a native ListQueues
// through each node, in clear and over TLS, lists every one with its depth. It failed
// NOT_LEADER on every node as soon as a page's queues had two leaders (`sluice queue list`
// on any cluster with queues spread): their stats are their leaders'.
func checkListQueuesAcrossLeaders(ctx context.Context, t *testing.T, c *cluster, clients map[string]func(int) *client.Client) {
	t.Helper()
	leaders := map[int]string{}
	for i := 0; len(leaders) < 3 && i < 30; i++ {
		name := fmt.Sprintf("listed-%02d", i)
		for {
			_, err := c.native(1).CreateQueue(ctx, name, nil)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("create queue %s: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := c.native(1).Send(ctx, name, []byte("one")); err != nil {
			t.Fatalf("send to %s: %v", name, err)
		}
		if l := c.queueLeader(ctx, t, name); leaders[l] == "" {
			leaders[l] = name
		}
	}
	if len(leaders) < 2 {
		t.Fatalf("the listed queues' leaders: %v, want at least two nodes", leaders)
	}
	for how, cl := range clients {
		for id := 1; id <= 3; id++ {
			qs, err := cl(id).ListQueues(ctx, "listed-")
			if err != nil {
				t.Fatalf("ListQueues %s through node %d (queues led by %v): %v", how, id, leaders, err)
			}
			seen := map[string]bool{}
			for _, q := range qs {
				seen[q.GetName()] = true
				if q.GetStats().GetVisible() != 1 {
					t.Errorf("ListQueues %s through node %d: %s has %d visible, want 1", how, id, q.GetName(), q.GetStats().GetVisible())
				}
			}
			for l, name := range leaders {
				if !seen[name] {
					t.Errorf("ListQueues %s through node %d: %s (led by node %d) missing from %d queues", how, id, name, l, len(qs))
				}
			}
		}
	}
}

// checkSQSOverTLS: the AWS SDK, over HTTPS to a node that does not lead its queue, sends,
// receives and deletes; the node forwarded over the cluster transport (its streams counter
// moved), and the queue URLs it was given name the TLS listener it called.
func checkSQSOverTLS(ctx context.Context, t *testing.T, c *cluster, tc *tls.Config) {
	t.Helper()
	over := func(id int) *awssqs.Client {
		return c.sqsClient(ctx, t, id, func(o *awssqs.Options) {
			o.BaseEndpoint = aws.String("https://" + c.procs[id-1].Addr("sqs-tls"))
			o.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		})
	}
	createQueue(ctx, t, over(1), "secure-sqs", 30)
	leader := c.queueLeader(ctx, t, "secure-sqs")
	via := leader%3 + 1
	opened, _ := metric(c, via, "sluice_raft_transport_streams_opened_total")
	cl := over(via)
	url, err := cl.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("secure-sqs")})
	if err != nil {
		t.Fatalf("GetQueueUrl over TLS through node %d: %v", via, err)
	}
	if want := "https://" + c.procs[via-1].Addr("sqs-tls") + "/"; !strings.HasPrefix(aws.ToString(url.QueueUrl), want) {
		t.Errorf("queue URL %s, want one under %s (the listener the client called)", aws.ToString(url.QueueUrl), want)
	}
	if _, err := cl.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: url.QueueUrl, MessageBody: aws.String("sqs over TLS")}); err != nil {
		t.Fatalf("SendMessage over TLS through node %d (node %d leads): %v", via, leader, err)
	}
	got, err := cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: url.QueueUrl, WaitTimeSeconds: 2})
	if err != nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != "sqs over TLS" {
		t.Fatalf("ReceiveMessage over TLS through node %d: %v, %v", via, got, err)
	}
	if _, err := cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: url.QueueUrl, ReceiptHandle: got.Messages[0].ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage over TLS through node %d: %v", via, err)
	}
	if now, _ := metric(c, via, "sluice_raft_transport_streams_opened_total"); now <= opened {
		t.Errorf("node %d opened no stream over the cluster transport for its SQS TLS clients (%v, before %v): forwarded in clear", via, now, opened)
	}
}
