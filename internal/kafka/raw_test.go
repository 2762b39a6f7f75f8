package kafka

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/batch"
)

// rawConn speaks the Kafka protocol by hand, for what real clients never
// send: bad frames, pipelined bursts, old versions, acks=0.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

func (n *node) raw() *rawConn {
	n.t.Helper()
	c, err := net.Dial("tcp", n.addr)
	if err != nil {
		n.t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	n.t.Cleanup(func() { c.Close() })
	return &rawConn{t: n.t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

// send writes a request and returns its correlation id.
func (r *rawConn) send(req kmsg.Request) int32 {
	r.t.Helper()
	r.corr++
	if _, err := r.c.Write(r.f.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatal(err)
	}
	return r.corr
}

// frame reads one response frame.
func (r *rawConn) frame() ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r.c, sz[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := io.ReadFull(r.c, buf)
	return buf, err
}

// recv reads the response to req, checking its correlation id.
func (r *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	r.t.Helper()
	buf, err := r.frame()
	if err != nil {
		r.t.Fatalf("%s v%d: reading response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		r.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	buf = buf[4:]
	if req.IsFlexible() && req.Key() != 18 {
		buf = buf[1:] // empty header tags
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(buf); err != nil {
		r.t.Fatalf("%s v%d: decoding response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (r *rawConn) do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	return r.recv(req, r.send(req))
}

// expectClosed checks the server closed the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	if b, err := r.frame(); err == nil {
		r.t.Fatalf("connection still open; got a %d-byte response", len(b))
	}
}

// buildBatch makes a valid uncompressed batch of n records.
func buildBatch(t *testing.T, n int, prod *batch.Producer) []byte {
	t.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{Timestamp: time.Now().UnixMilli(), Value: []byte{byte(i)}}
	}
	b, err := batch.Build(recs, batch.Options{Producer: prod})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceReq(version int16, acks int16, topic string, part int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchReq(version int16, topic string, part int32, offset int64, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWait, 1, 10<<20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = part, offset, 1<<20
	fp.CurrentLeaderEpoch, fp.LogStartOffset = -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}
