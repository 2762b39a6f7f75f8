package kafka

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// FuzzDecodeRequest feeds arbitrary frames (without the size prefix) to
// the header and body decoder: it must fail cleanly or return a request
// that encodes again.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(frameOf(s.key, s.version, s.body))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := decodeRequest(frame)
		if err != nil {
			return
		}
		if req == nil || req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("decoded %v for header %+v", req, h)
		}
		req.AppendTo(nil)
	})
}

// FuzzDispatch runs arbitrary request bodies through the full handling
// path (decode, handler, response encoding) of a served API key and
// version, against a real broker. The server's context is cancelled, so
// long-polls and group joins answer at once instead of waiting.
func FuzzDispatch(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s.key, s.version, s.body)
	}
	b, err := broker.Open(broker.Options{Dir: f.TempDir(), Logger: quietLogger(), Sync: broker.SyncPolicy{Mode: broker.SyncNever}})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(broker.TopicSettings{Name: "fz", Partitions: 2}); err != nil {
		f.Fatal(err)
	}
	srv := New(b, Config{Logger: quietLogger(), AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092})
	srv.cancel()
	keys := sortedKeys()
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		// Fold the input onto a served key and version, so every input
		// reaches a handler.
		key = keys[int(uint16(key))%len(keys)]
		a := apis[key]
		version = a.min + int16(int(uint16(version))%int(a.max-a.min+1))
		if tooCostly(key, version, body) {
			return
		}
		ours, theirs := net.Pipe()
		go io.Copy(io.Discard, theirs)
		c := newConn(srv, ours)
		done := make(chan error, 1)
		go func() { done <- c.handle(frameOf(key, version, body)) }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			// A stuck handler is a bug (a connection goroutine that never
			// ends): show where it is.
			buf := make([]byte, 1<<20)
			t.Fatalf("%s v%d stuck:\n%s", kmsg.NameForKey(key), version, buf[:runtime.Stack(buf, true)])
		}
		ours.Close()
		if errors.Is(err, errHandlerPanic) {
			t.Fatal(err)
		}
	})
}

// tooCostly skips inputs that would create thousands of partition logs:
// correct, but too slow for a fuzz loop.
func tooCostly(key, version int16, body []byte) bool {
	switch key {
	case 19:
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return false
		}
		for _, t := range req.Topics {
			if t.NumPartitions > 4 || len(req.Topics) > 4 {
				return true
			}
		}
	case 37:
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.SetVersion(version)
		if req.ReadFrom(body) != nil {
			return false
		}
		for _, t := range req.Topics {
			if t.Count > 8 {
				return true
			}
		}
	}
	return false
}

// frameOf builds a request frame (without size prefix): a v1 or v2 header
// with client id "fuzz", then body.
func frameOf(key, version int16, body []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "fuzz"...)
	if req := kmsg.RequestForKey(key); req != nil {
		req.SetVersion(version)
		if req.IsFlexible() {
			b = append(b, 0)
		}
	}
	return append(b, body...)
}

type seedRequest struct {
	key, version int16
	body         []byte
}

// seedRequests is every served API at its lowest and highest version with
// default fields, plus a produce and a fetch of topic "fz".
func seedRequests() []seedRequest {
	var out []seedRequest
	for _, key := range sortedKeys() {
		a := apis[key]
		for _, v := range []int16{a.min, a.max} {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			out = append(out, seedRequest{key, v, req.AppendTo(nil)})
		}
	}
	good, _ := batch.Build([]batch.Record{{Timestamp: 1, Key: []byte("k"), Value: []byte("v")}}, batch.Options{})
	out = append(out,
		seedRequest{0, 9, produceReq(9, -1, "fz", 0, good).AppendTo(nil)},
		seedRequest{0, 3, produceReq(3, 1, "fz", 1, good).AppendTo(nil)},
		seedRequest{1, 12, fetchReq(12, "fz", 0, 0, 100).AppendTo(nil)},
		seedRequest{1, 4, fetchReq(4, "fz", 1, 0, 100).AppendTo(nil)},
	)
	out = append(out, seedConsumerGroup()...)
	out = append(out, seedShareGroup([16]byte{1})...)
	return append(append(out, seedNewAPIs()...), seedTxnAPIs()...)
}

// seedNewAPIs are populated requests of the decode paths issue 16 added:
// batched FindCoordinator and OffsetFetch, topic ids, the config alters,
// OffsetDelete, DescribeLogDirs, DescribeProducers, ListOffsets -3, and
// ApiVersions v5 naming a cluster and node (this one, another, half of one).
func seedNewAPIs() []seedRequest {
	at := func(req kmsg.Request, v int16) seedRequest {
		req.SetVersion(v)
		return seedRequest{req.Key(), v, req.AppendTo(nil)}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g1", "g2"}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g1"}, {Group: "g2", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "fz", Partitions: []int32{0, 1}}}}}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: [16]byte{1, 2, 3}}}
	fetch := fetchReq(apis[1].max, "", 0, 0, 100)
	fetch.Topics[0].TopicID = [16]byte{1}
	v := "3600000"
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.ValidateOnly = true
	iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: opSet, Value: &v}, {Name: "cleanup.policy", Op: opAppend, Value: &v}}}}
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.ValidateOnly = true
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz",
		Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: &v}}}}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g1"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "fz", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	ld := kmsg.NewPtrDescribeLogDirsRequest()
	ld.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "fz", Partitions: []int32{0}}}
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "fz", Partitions: []int32{0, 1}}}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "fz", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -3}}}}
	out := []seedRequest{
		at(fc, apis[10].max), at(of, apis[9].max), at(dt, apis[20].max),
		{1, fetch.Version, fetch.AppendTo(nil)},
		at(iac, apis[44].max), at(ac, apis[33].max), at(od, 0), at(ld, apis[35].max), at(dp, 0), at(lo, apis[2].max),
	}
	cluster, other := "sluice", "other"
	for _, ids := range []struct {
		cluster *string
		node    int32
	}{{&cluster, 0}, {&other, 0}, {nil, 0}} {
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion, av.ClusterID, av.NodeID = "fz", "1", ids.cluster, ids.node
		out = append(out, at(av, apis[18].max))
	}
	return out
}

// TestWriteFuzzCorpus writes the seeds to testdata/fuzz when
// SLUICE_WRITE_FUZZ_CORPUS=1, so the corpus on disk follows the table.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("SLUICE_WRITE_FUZZ_CORPUS") != "1" {
		t.Skip("set SLUICE_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz")
	}
	// Seeds are named by API, version and a hash of the body, not by their place in the
	// list, so adding an API adds its files and renames none; the old seeds go first.
	for _, target := range []string{"FuzzDecodeRequest", "FuzzDispatch"} {
		old, _ := filepath.Glob(filepath.Join("testdata", "fuzz", target, "seed-*"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range seedRequests() {
		sum := sha256.Sum256(s.body)
		name := fmt.Sprintf("seed-%s-v%d-%x", kmsg.NameForKey(s.key), s.version, sum[:4])
		write := func(target, content string) {
			dir := filepath.Join("testdata", "fuzz", target)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte("go test fuzz v1\n"+content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("FuzzDecodeRequest", fmt.Sprintf("[]byte(%s)\n", strconv.Quote(string(frameOf(s.key, s.version, s.body)))))
		write("FuzzDispatch", fmt.Sprintf("int16(%d)\nint16(%d)\n[]byte(%s)\n", s.key, s.version, strconv.Quote(string(s.body))))
	}
}
