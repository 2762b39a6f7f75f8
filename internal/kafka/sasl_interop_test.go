package kafka

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// needClient finds an interop client; without it the test fails (or
// skips, see testproc.Missing).
func needClient(t *testing.T, path, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(path)
	if err != nil {
		testproc.Missing(t, fmt.Sprintf("%s is not installed (apt-get install %s)", path, pkg))
	}
	return p
}

// kcatSASL runs kcat with SASL_PLAINTEXT and SCRAM-SHA-256 as user.
func (n *authNode) kcatSASL(user, pass, stdin string, args ...string) (string, error) {
	path := needClient(n.t.(*testing.T), "kcat", "kcat")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"-b", n.addr, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}
	cmd := exec.CommandContext(ctx, path, append(base, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// TestKcatSASL: kcat (librdkafka) with SASL_PLAINTEXT and SCRAM-SHA-256
// lists, produces and consumes; a wrong password fails with librdkafka's
// report of SASL_AUTHENTICATION_FAILED; a user without produce rights
// gets TOPIC_AUTHORIZATION_FAILED.
func TestKcatSASL(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	if md, err := n.kcatSASL("alice", "alice-secret", "", "-L", "-t", "orders"); err != nil || !strings.Contains(md, `topic "orders" with 2 partitions`) {
		t.Fatalf("kcat -L: %v\n%s", err, md)
	}
	if out, err := n.kcatSASL("alice", "alice-secret", "k1:one\nk2:two\n", "-P", "-t", "orders", "-K:"); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	out, err := n.kcatSASL("alice", "alice-secret", "", "-C", "-t", "orders", "-o", "beginning", "-e", "-K:", "-f", "%k:%s\n")
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, out)
	}
	checkPerKeyOrder(t, []string{"k1:one", "k2:two"}, strings.Split(strings.TrimSpace(out), "\n"))

	out, err = n.kcatSASL("alice", "wrong", "", "-L", "-m", "2")
	if err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
	out, err = n.kcatSASL("bob", "bob-secret", "x\n", "-P", "-t", "orders")
	if err == nil && !strings.Contains(out, "Topic authorization failed") {
		t.Fatalf("bob producing: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Topic authorization failed") && !strings.Contains(out, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("bob producing: %s", out)
	}
}

// TestPythonSASL: confluent-kafka-python with SASL PLAIN and kafka-python
// with SCRAM-SHA-256 produce and group-consume through testdata/pyclient.py.
// kafka-python 2.0 sends SaslHandshake v0 and raw tokens: the old path.
func TestPythonSASL(t *testing.T) {
	python := needClient(t, "/usr/bin/python3", "python3")
	for _, tc := range []struct{ lib, module, pkg, mech string }{
		{"confluent", "confluent_kafka", "python3-confluent-kafka", "PLAIN"},
		{"kafka-python", "kafka", "python3-kafka", "SCRAM-SHA-256"},
	} {
		t.Run(tc.lib+"/"+tc.mech, func(t *testing.T) {
			if exec.Command(python, "-c", "import "+tc.module).Run() != nil {
				testproc.Missing(t, fmt.Sprintf("python module %s is not installed (apt-get install %s)", tc.module, tc.pkg))
			}
			n := startAuthNode(t, testUsers, Config{}, "orders")
			const count = 50
			ctx := testCtx(t, 90*time.Second)
			cmd := exec.CommandContext(ctx, python, "testdata/pyclient.py", tc.lib, n.addr, "orders", "g-py", fmt.Sprint(count))
			cmd.Env = append(os.Environ(), "SASL_MECHANISM="+tc.mech, "SASL_USERNAME=alice", "SASL_PASSWORD=alice-secret")
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\nstderr:\n%s", tc.lib, err, errb.String())
			}
			var want []string
			for i := range count {
				want = append(want, fmt.Sprintf("key%d:%s-%d", i%7, tc.lib, i))
			}
			checkPerKeyOrder(t, want, strings.Split(strings.TrimSpace(out.String()), "\n"))
		})
	}
}

// TestSaramaSASLv0: Sarama with SaslHandshake v0, the raw-token exchange
// old clients use, with PLAIN: it produces, and a wrong password fails.
func TestSaramaSASLv0(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	cfg := func(pass string) *sarama.Config {
		c := sarama.NewConfig()
		c.Version = sarama.V1_0_0_0
		c.Net.SASL.Enable = true
		c.Net.SASL.Handshake = true
		c.Net.SASL.Version = sarama.SASLHandshakeV0
		c.ApiVersionsRequest = false // Sarama refuses it with a v0 handshake
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		c.Net.SASL.User, c.Net.SASL.Password = "alice", pass
		c.Producer.Return.Successes = true
		c.Producer.RequiredAcks = sarama.WaitForAll
		c.Metadata.Retry.Max = 0
		return c
	}
	prod, err := sarama.NewSyncProducer([]string{n.addr}, cfg("alice-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "orders", Value: sarama.StringEncoder("v0")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sarama.NewSyncProducer([]string{n.addr}, cfg("wrong")); err == nil {
		t.Fatal("a wrong password connected")
	}
}

// execCommand is exec.CommandContext bounded by 60 s.
func execCommand(t *testing.T, path string, args ...string) *exec.Cmd {
	return exec.CommandContext(testCtx(t, 60*time.Second), path, args...)
}
