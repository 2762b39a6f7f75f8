package broker

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestClusterQueueCreateWaitsForLeader: CreateQueue returns once its node knows the new
// group's leader, so a send right after it is served, not refused while the group elects
// (the AWS SDK's retry budget ran out on those refusals in bench/cluster/w2.sh).
func TestClusterQueueCreateWaitsForLeader(t *testing.T) {
	c := newQCluster(t, 3)
	l := c.metaLeader()
	for _, name := range []string{"a", "b", "c"} {
		s, err := l.b.CreateQueue(QueueSettings{Name: name, VisibilityTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		st, err := l.host.Status(multiraft.GroupID(s.ID))
		if err != nil {
			t.Fatalf("%s: the creating node hosts no group %d: %v", name, s.ID, err)
		}
		if st.Leader == 0 {
			t.Fatalf("%s: CreateQueue returned before its group had a leader (%+v)", name, st)
		}
	}
}
