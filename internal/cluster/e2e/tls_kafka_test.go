package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// checkKafkaOverTLS: a Kafka client that knows only node 1's TLS listener (certificates
// of caCert) is told every node by its TLS listener and produces to partitions led by
// each of the three nodes. Before, Metadata on a TLS listener named the other nodes by
// their plaintext ports, and a produce to a partition another node led failed its TLS
// handshake there: no Kafka client could use a cluster over TLS.
func checkKafkaOverTLS(ctx context.Context, t *testing.T, c *cluster, caCert string) {
	t.Helper()
	pem, err := os.ReadFile(caCert)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tlsPorts := map[int32]string{}
	for i := range c.procs {
		tlsPorts[int32(i+1)] = c.procs[i].Addr("kafka-tls")
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(tlsPorts[1]), kgo.DialTLSConfig(&tls.Config{RootCAs: roots}),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1<<20), kgo.RetryTimeout(60*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	createTopic(ctx, t, adm, "tlsspread", 3, 3)
	// Every node's TLS listener, once each node has asked the others (a few seconds).
	deadline := time.Now().Add(20 * time.Second)
	for {
		md, err := adm.BrokerMetadata(ctx)
		told := map[int32]string{}
		if err == nil {
			for _, b := range md.Brokers {
				told[b.NodeID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
			}
		}
		if fmt.Sprint(told) == fmt.Sprint(tlsPorts) {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			t.Fatalf("brokers over TLS: %v (%v), want the TLS listeners %v", told, err, tlsPorts)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// `sluice cluster status` lists them too.
	if out := c.cli(t, 1, "cluster", "status"); !strings.Contains(out, "KAFKA TLS") || !strings.Contains(out, tlsPorts[3]) {
		t.Errorf("cluster status does not list the TLS listeners %v:\n%s", tlsPorts, out)
	}
	leaders := map[int]bool{}
	for p := range int32(3) {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := kc.ProduceSync(pctx, &kgo.Record{Topic: "tlsspread", Partition: p, Value: []byte("over tls")}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce over TLS to tlsspread/%d: %v", p, err)
		}
		leaders[c.leaderOf(ctx, adm, "tlsspread", p)] = true
	}
	t.Logf("produced over TLS to partitions led by nodes %v", leaders)
}
