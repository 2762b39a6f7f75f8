package broker

import (
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
)

// TestClusterNodesTellTheirTLSListeners: every node learns the others' TLS listeners by
// asking them (they are not in the catalog), and ClusterNodes shows them beside the
// registered plaintext addresses — what a Kafka front-end on a TLS listener names the
// other brokers by. A node restarted with other listeners is asked again once it is back.
func TestClusterNodesTellTheirTLSListeners(t *testing.T) {
	c := newQCluster(t, 3)
	tls := func(id uint64, gen int) meta.Listeners {
		return meta.Listeners{KafkaTLS: fmt.Sprintf("k%d-%d:9093", id, gen), HTTPTLS: fmt.Sprintf("h%d:8443", id)}
	}
	for _, id := range c.ids {
		c.nodes[id].meta.SetListeners(tls(uint64(id), 1))
	}
	want := func(gen2 int) func() error {
		return func() error {
			for _, id := range c.ids {
				for _, n := range c.nodes[id].b.ClusterNodes() {
					gen := 1
					if n.ID == 2 {
						gen = gen2
					}
					w := tls(uint64(n.ID), gen)
					if n.KafkaTLSAddr != w.KafkaTLS || n.HTTPTLSAddr != w.HTTPTLS || n.SQSTLSAddr != "" {
						return fmt.Errorf("node %d sees node %d's TLS listeners as %+v, want %+v", id, n.ID, n, w)
					}
				}
			}
			return nil
		}
	}
	c.eventually("every node knows every node's TLS listeners", want(1))

	c.stop(2)
	c.start(2, false)
	c.nodes[2].meta.SetListeners(tls(2, 2))
	c.eventually("node 2's new listeners, once it is back", want(2))
}
