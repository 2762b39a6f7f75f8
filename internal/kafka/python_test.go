package kafka

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestPythonClients drives confluent-kafka-python (librdkafka) and
// kafka-python, as Debian ships them, through testdata/pyclient.py:
// produce keyed records, then consume them with a consumer group.
func TestPythonClients(t *testing.T) {
	// Debian's python3-* packages install for the system interpreter,
	// which a pyenv or venv earlier on PATH would not see.
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			testproc.Missing(t, "python3 is not installed")
		}
	}
	for _, tc := range []struct{ lib, module, pkg string }{
		{"confluent", "confluent_kafka", "python3-confluent-kafka"},
		{"kafka-python", "kafka", "python3-kafka"},
	} {
		t.Run(tc.lib, func(t *testing.T) {
			if exec.Command(python, "-c", "import "+tc.module).Run() != nil {
				testproc.Missing(t, fmt.Sprintf("python module %s is not installed (apt-get install %s)", tc.module, tc.pkg))
			}
			n := startNode(t, "")
			n.createTopic("py", 3)
			const count = 300
			ctx := testCtx(t, 90*time.Second)
			cmd := exec.CommandContext(ctx, python, "testdata/pyclient.py", tc.lib, n.addr, "py", "pygroup", fmt.Sprint(count))
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
			// The group committed what it consumed.
			for p := range int32(3) {
				if c, ok := n.b.FetchOffset("pygroup", "py", p); !ok || c.Offset <= 0 {
					t.Errorf("partition %d: committed %+v %v", p, c, ok)
				}
			}
		})
	}
}
