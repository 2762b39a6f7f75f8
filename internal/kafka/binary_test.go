package kafka

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRealBinary runs `sluice serve` as built, finds its Kafka listener in
// the "listening" log line, and drives it with franz-go (and kcat when
// installed): what CI's clients meet is the production wiring, not a test
// harness.
func TestRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-mq/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "127.0.0.1:0", "--sqs-addr", "", "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	addrc := make(chan string, 1)
	logsDone := make(chan struct{})
	go func() { // owned by the test: ends at EOF, when the process exits
		defer close(logsDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Msg, Listener, Advertised string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" && l.Listener == "kafka" {
				addrc <- l.Advertised
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(30 * time.Second):
		t.Fatal("no kafka listening line within 30s")
	}

	n := &node{t: t, addr: addr}
	ctx := testCtx(t, 60*time.Second)
	if _, err := kadm.NewClient(n.client()).CreateTopic(ctx, 3, 1, nil, "bin"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	var want []string
	for i := range 1000 {
		k, v := fmt.Sprintf("k%d", i%9), fmt.Sprint(i)
		recs = append(recs, &kgo.Record{Topic: "bin", Key: []byte(k), Value: []byte(v)})
		want = append(want, k+":"+v)
	}
	if err := n.client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consumeN(t, n.client(kgo.ConsumeTopics("bin"), kgo.ConsumerGroup("bing"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), 1000)
	var lines []string
	for _, r := range got {
		lines = append(lines, string(r.Key)+":"+string(r.Value))
	}
	checkPerKeyOrder(t, want, lines)
	if _, err := exec.LookPath("kcat"); err == nil {
		if md := n.kcat("", "-L"); !strings.Contains(md, `topic "bin" with 3 partitions`) {
			t.Errorf("kcat -L:\n%s", md)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-logsDone
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
