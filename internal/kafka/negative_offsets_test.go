package kafka

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestKcatNegativeCommit: a group that consumed everything is reset to
// earliest by committing -2 (as KafkaJS's resetOffsets does), through
// kadm; a second client, librdkafka, reads the stored -2 back as "no
// offset" (as the Java client does), applies its reset policy and consumes
// everything again. Before sluice stored -2, the commit was refused and the
// group stayed at the end.
func TestKcatNegativeCommit(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		testproc.Missing(t, "kcat is not installed (apt-get install kcat)")
	}
	n := startNode(t, "")
	n.createTopic("kn", 1)
	n.kcat("a\nb\nc\n", "-P", "-t", "kn")
	adm := n.admin()
	ctx := testCtx(t, 30*time.Second)
	// Consume all three and commit the end.
	if out := n.kcat("", "-G", "kg", "-o", "beginning", "-c", "3", "-f", "%s\n", "kn"); len(strings.Fields(out)) != 3 {
		t.Fatalf("first read: %q", out)
	}
	if c, ok := n.b.FetchOffset("kg", "kn", 0); !ok || c.Offset != 3 {
		t.Fatalf("kcat committed %+v %v, want 3", c, ok)
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "kn", Partition: 0, At: -2, LeaderEpoch: -1})
	if rs, err := adm.CommitOffsets(ctx, "kg", os); err != nil || rs.Error() != nil {
		t.Fatalf("commit -2: %v %v", err, rs.Error())
	}
	out := n.kcat("", "-G", "kg", "-o", "beginning", "-c", "3", "-f", "%s\n", "kn")
	if got := strings.Fields(out); strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("kcat from a -2 commit read %q, want a,b,c", got)
	}
}
