package kafka

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestRealBinary runs `sluice serve` as built, finds its Kafka listener in
// the "listening" log line, and drives it with franz-go (and kcat when
// installed): what CI's clients meet is the production wiring, not a test
// harness.
func TestRealBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testproc.Build(t, t.TempDir())
	proc := testproc.Serve(t, bin, "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "127.0.0.1:0", "--sqs-addr", "")
	addr := proc.Addr("kafka")

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

	proc.Stop()
}
