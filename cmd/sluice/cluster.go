package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/node"
)

func init() { subcommands = append(subcommands, newClusterCmd) }

func newClusterCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("cluster", "A cluster's nodes and who leads each partition (docs/cluster.md)", f)
	cmd.AddCommand(clusterStatusCmd(f), clusterTransferCmd(f), clusterAddNodeCmd(f), clusterRemoveNodeCmd(f), clusterReassignCmd(f), clusterElectCmd(f))
	return cmd
}

func clusterStatusCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The nodes, the controller, and every partition and queue the node hosts with its leader, term and replicas",
		Long: `Show the cluster as the node --server names sees it: every node the catalog
knows with its addresses and whether it is heard from, the controller (the leader
of the metadata group), the cluster's feature level (which kinds of record the
logs may hold: it rises once every node reads the next one; the controller lists
the nodes holding it back), and for each partition that node hosts a replica of: its
Raft group, leader, preferred leader (starred when it does not lead: "sluice
cluster elect" hands it back), term (Kafka's leader epoch), replicas, in-sync
replicas (known on the leader), commit index, and whether an operator pinned its
placement (a reassignment); then each queue it hosts a replica of: its leader,
preferred leader, term, replicas, commit index, depth (messages not yet deleted)
and pin.`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, _ []string) error {
		var st broker.ClusterStatus
		if err := adminCall(ctx, f, f.server, "GET", node.ClusterPath, nil, &st); err != nil {
			return err
		}
		if f.json() {
			return json.NewEncoder(cmd.OutOrStdout()).Encode(st)
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "node %d; controller %s; feature level %d (this node reads %d)\n", st.Node, nodeName(st.Controller), st.FeatureLevel, st.ReadsFeatureLevel)
		if len(st.FeatureLevelHeldBy) > 0 {
			fmt.Fprintf(out, "feature level held by: %s\n", strings.Join(st.FeatureLevelHeldBy, ", "))
		}
		rows := make([][]string, len(st.Nodes))
		anyTLS := false
		for i, n := range st.Nodes {
			rows[i] = []string{strconv.Itoa(int(n.ID)), strconv.FormatBool(n.Alive), n.KafkaAddr, n.HTTPAddr, n.SQSAddr}
			anyTLS = anyTLS || n.KafkaTLSAddr != "" || n.HTTPTLSAddr != "" || n.SQSTLSAddr != ""
		}
		header := []string{"NODE", "ALIVE", "KAFKA", "HTTP", "SQS"}
		if anyTLS { // the TLS listeners, as each node told this one (none: no columns)
			header = append(header, "KAFKA TLS", "HTTP TLS", "SQS TLS")
			for i, n := range st.Nodes {
				rows[i] = append(rows[i], orDash(n.KafkaTLSAddr), orDash(n.HTTPTLSAddr), orDash(n.SQSTLSAddr))
			}
		}
		if err := table(out, header, rows); err != nil {
			return err
		}
		fmt.Fprintln(out)
		rows = make([][]string, len(st.Partitions))
		for i, p := range st.Partitions {
			rows[i] = []string{p.Topic, strconv.Itoa(int(p.Partition)), nodeName(p.Leader), preferred(p.Preferred, p.Leader), strconv.FormatUint(p.Term, 10),
				ids(p.Replicas), ids(p.InSync), ids(p.Learners), strconv.FormatUint(p.Commit, 10), strconv.FormatBool(p.Quiesced), strconv.FormatBool(p.Pinned)}
		}
		if err := table(out, []string{"TOPIC", "PARTITION", "LEADER", "PREFERRED", "TERM", "REPLICAS", "IN-SYNC", "LEARNERS", "COMMIT", "QUIET", "PINNED"}, rows); err != nil {
			return err
		}
		if len(st.Queues) > 0 {
			fmt.Fprintln(out)
			rows = make([][]string, len(st.Queues))
			for i, q := range st.Queues {
				rows[i] = []string{q.Queue, nodeName(q.Leader), preferred(q.Preferred, q.Leader), strconv.FormatUint(q.Term, 10), ids(q.Replicas), ids(q.Learners),
					strconv.FormatUint(q.Commit, 10), strconv.FormatInt(q.Depth, 10), strconv.FormatBool(q.Quiesced), strconv.FormatBool(q.Pinned)}
			}
			if err := table(out, []string{"QUEUE", "LEADER", "PREFERRED", "TERM", "REPLICAS", "LEARNERS", "COMMIT", "DEPTH", "QUIET", "PINNED"}, rows); err != nil {
				return err
			}
		}
		return printMembership(out, st.Membership)
	})
	return cmd
}

func clusterTransferCmd(f *clientFlags) *cobra.Command {
	var to int32
	cmd := &cobra.Command{
		Use:   "transfer-leader TOPIC PARTITION --to NODE",
		Short: "Hand a partition's leadership to another in-sync replica",
		Long: `Ask the leader of TOPIC's PARTITION to hand its leadership to node --to, which
must be an in-sync replica. The command finds the leader from the node --server
names and asks it directly. Raft starts the transfer at once and gives up after an
election timeout if the target does not catch up; "sluice cluster status" shows the
result. Leaders also return to their preferred replica by themselves, every
--cluster-leader-balance (10 s; 0: never); Kafka's ElectLeaders
(kafka-leader-election.sh --election-type preferred) does it on request.`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().Int32Var(&to, "to", 0, "the `node` to lead the partition")
	cmd.RunE = runE(f, func(ctx context.Context, cmd *cobra.Command, _ *client.Client, args []string) error {
		p, err := strconv.ParseInt(args[1], 10, 32)
		if err != nil || p < 0 {
			return fmt.Errorf("PARTITION: want a partition number, got %q", args[1])
		}
		if to <= 0 {
			return errors.New("--to: name the node to lead the partition")
		}
		req := node.TransferRequest{Topic: args[0], Partition: int32(p), To: to}
		server := f.server
		// Asked of a follower, the node answers 421 naming the leader: ask it there.
		for range 2 {
			var ae node.AdminError
			err := adminCall(ctx, f, server, "POST", node.ClusterTransferPath, req, nil)
			if !errors.As(err, &ae) || ae.Leader == 0 {
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "transfer of %s/%d to node %d started\n", req.Topic, req.Partition, to)
				}
				return err
			}
			if server, err = nodeURL(ctx, f, ae.Leader); err != nil {
				return err
			}
		}
		return errors.New("the partition's leadership moved while the transfer was being asked for: try again")
	})
	return cmd
}

// nodeURL is the native API address node id registered, as seen from --server.
func nodeURL(ctx context.Context, f *clientFlags, id int32) (string, error) {
	var st broker.ClusterStatus
	if err := adminCall(ctx, f, f.server, "GET", node.ClusterPath, nil, &st); err != nil {
		return "", err
	}
	for _, n := range st.Nodes {
		if n.ID == id && n.HTTPAddr != "" {
			scheme := "http://"
			if strings.HasPrefix(f.server, "https://") {
				scheme = "https://"
			}
			return scheme + n.HTTPAddr, nil
		}
	}
	return "", fmt.Errorf("node %d leads the partition but has not registered its HTTP address", id)
}

// adminCall sends one admin request; a JSON error body comes back as a node.AdminError.
func adminCall(ctx context.Context, f *clientFlags, server, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(server, "/")+path, rd)
	if err != nil {
		return err
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	hc := http.DefaultClient
	if f.tls.config != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = f.tls.config
		hc = &http.Client{Transport: t}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		// Refused before the handler (credentials, rights): the same reasons, and so the
		// same hints (clierrors.go), as a native call's; it was a bare "401 Unauthorized".
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			return &client.Error{Code: connect.CodeUnauthenticated, Reason: "UNAUTHENTICATED", Message: path + " needs credentials this node accepts"}
		case http.StatusForbidden:
			return &client.Error{Code: connect.CodePermissionDenied, Reason: "PERMISSION_DENIED", Message: path + " is not allowed to this user"}
		}
		var ae node.AdminError
		if json.Unmarshal(data, &ae) == nil && ae.Message != "" {
			return ae
		}
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// preferred is the preferred leader's id, starred when it is not the leader: a partition
// or queue `sluice cluster elect` would hand back.
func preferred(id, leader int32) string {
	if id == 0 {
		return "?"
	}
	if id != leader {
		return strconv.Itoa(int(id)) + "*"
	}
	return strconv.Itoa(int(id))
}

func nodeName(id int32) string {
	if id == 0 {
		return "none (an election, or too few replicas up to hold one)"
	}
	return strconv.Itoa(int(id))
}

func ids(ns []int32) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(int(n))
	}
	return strings.Join(s, ",")
}
