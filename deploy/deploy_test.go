// Package deploy_test checks the files operators deploy sluice with: the
// Prometheus alert rules and the Grafana dashboard name only metrics a
// running broker serves, and the systemd unit passes systemd-analyze.
package deploy_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/testproc"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/sluicetest"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var metricName = regexp.MustCompile(`\bsluice_[a-z0-9_]+`)

// alertMetrics parses the rules file and returns every sluice_ metric its
// expressions name, failing on a rule without its name, expression,
// severity or summary.
func alertMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("prometheus/sluice-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("sluice-alerts.yml is not YAML: %v", err)
	}
	names := map[string]bool{}
	seen := map[string]bool{}
	for _, g := range f.Groups {
		if len(g.Rules) == 0 {
			t.Errorf("group %q has no rules", g.Name)
		}
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || r.Expr == "":
				t.Errorf("group %q: a rule without alert or expr: %+v", g.Name, r)
			case seen[r.Alert]:
				t.Errorf("alert %s appears twice", r.Alert)
			case r.Labels["severity"] == "" || r.Annotations["summary"] == "":
				t.Errorf("alert %s has no severity label or summary", r.Alert)
			}
			seen[r.Alert] = true
			for _, n := range metricName.FindAllString(r.Expr, -1) {
				names[n] = true
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("only %d alerts parsed: the file's shape changed", len(seen))
	}
	return names
}

// dashboardMetrics returns every sluice_ metric the Grafana dashboard's
// panel queries name.
func dashboardMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("grafana/sluice-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("sluice-dashboard.json is not JSON: %v", err)
	}
	names := map[string]bool{}
	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			queries++
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				names[n] = true
			}
		}
	}
	if queries < 8 {
		t.Fatalf("only %d panel queries parsed: the file's shape changed", queries)
	}
	return names
}

// TestDeployedMetricsExist starts a broker with an auth file, does what
// makes every family appear (a queue with a dead-letter queue, a topic, a
// group's commit, a refused request), scrapes /metrics and checks that each
// metric the rules and the dashboard name is served. A renamed metric
// fails here, not silently in production as an alert that never fires.
// The sluice_raft_* series only a cluster node serves are taken from a
// one-node cluster's /metrics.
func TestDeployedMetricsExist(t *testing.T) {
	exposed := scrapeBusyBroker(t) + scrapeClusterNode(t)
	for file, names := range map[string]map[string]bool{
		"prometheus/sluice-alerts.yml":  alertMetrics(t),
		"grafana/sluice-dashboard.json": dashboardMetrics(t),
	} {
		var missing []string
		for n := range names {
			if !regexp.MustCompile(`(?m)^` + n + `[{ ]`).MatchString(exposed) {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s names metrics /metrics does not serve: %v", file, missing)
		}
	}
}

func scrapeBusyBroker(t *testing.T) string {
	t.Helper()
	token := "deploy-test-token-0123456789"
	users := filepath.Join(t.TempDir(), "users.yaml")
	f := &auth.File{
		Users: []auth.User{{Name: "admin", Tokens: []string{auth.HashToken(token)}}},
		ACLs:  []auth.Rule{{User: "admin", Allow: []auth.Operation{"all"}, Resources: []auth.Pattern{"*"}}},
	}
	if err := auth.WriteFile(users, f); err != nil {
		t.Fatal(err)
	}
	srv := sluicetest.Start(t, sluicetest.WithAuthFile(users), sluicetest.WithFsync("never"))
	c := client.New(srv.URL, client.WithToken(token))
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "jobs-dlq", nil); err != nil {
		t.Fatal(err)
	}
	cfg := &client.QueueConfig{DeadLetter: &client.DeadLetterPolicy{Queue: "jobs-dlq", MaxReceives: 2}}
	if _, err := c.CreateQueue(ctx, "jobs", cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "jobs", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Receive(ctx, "jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	// A compacted topic: its partitions report sluice_compaction_dirty_ratio.
	if _, err := c.CreateTopic(ctx, "state", &client.TopicConfig{CleanupPolicy: sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Produce(ctx, "events", []*client.ProduceRecord{{Value: []byte("a")}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitOffsets(ctx, "reporting", "", -1, []*client.CommittedOffset{{Topic: "events", Partition: 0, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(srv.URL).ListQueues(ctx, ""); err == nil {
		t.Fatal("a request without a token was answered; the auth failure metric would not be exercised")
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	if !strings.Contains(string(b), "sluice_auth_failures_total{") {
		t.Fatalf("the refused request is not counted:\n%s", b)
	}
	return string(b)
}

// scrapeClusterNode runs `sluice serve` as a cluster of one node and returns its
// /metrics: the Raft host's series (sluice_raft_*) that a single node does not serve,
// which the sluice-cluster alert rules name. A process of the real binary, as only
// cmd/ and sluicetest may assemble a node in-process (deps_test.go).
func scrapeClusterNode(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raft := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	p := testproc.Serve(t, testproc.Build(t, dir), "--data-dir", filepath.Join(dir, "data"), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "127.0.0.1:0", "--sqs-addr", "", "--fsync", "never",
		"--node-id", "1", "--cluster-addr", raft, "--cluster-peers", "1="+raft)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + p.Addr("http") + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if out := string(b); resp.StatusCode == http.StatusOK && strings.Contains(out, "sluice_raft_groups ") {
				return out
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster node serves no Raft metrics within 30 s (%v):\n%s", err, p.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
