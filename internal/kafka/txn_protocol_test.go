package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/batch"
)

// txnRaw is a transactional producer spoken by hand.
type txnRaw struct {
	r     *rawConn
	t     *testing.T
	id    string
	pid   int64
	epoch int16
}

func initTxnRaw(t *testing.T, r *rawConn, id string) *txnRaw {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
	resp := r.do(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("init %s: %v", id, kerr.ErrorForCode(resp.ErrorCode))
	}
	return &txnRaw{r: r, t: t, id: id, pid: resp.ProducerID, epoch: resp.ProducerEpoch}
}

// add sends AddPartitionsToTxn v3 and returns each partition's code.
func (x *txnRaw) add(pid int64, epoch int16, topic string, parts ...int32) []int16 {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = x.id, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
	var codes []int16
	for _, p := range x.r.do(req).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	return codes
}

func (x *txnRaw) produce(topic string, part int32, epoch int16, seq int32) int16 {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.TransactionID, req.Acks, req.TimeoutMillis = &x.id, -1, 5000
	raw := buildBatch(x.t, 1, &batch.Producer{ID: x.pid, Epoch: epoch, BaseSequence: seq})
	raw[22] |= 0x10 // transactional (attributes bit 4), then the CRC again
	setCRC(raw)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return x.r.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

func setCRC(raw []byte) {
	crc := batch.ComputeCRC(raw)
	raw[17], raw[18], raw[19], raw[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
}

func (x *txnRaw) end(epoch int16, commit bool) int16 {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.id, x.pid, epoch, commit
	return x.r.do(req).(*kmsg.EndTxnResponse).ErrorCode
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	code := int16(0)
	if want != nil {
		code = want.Code
	}
	if got != code {
		t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// TestTxnProtocolErrors sends each transactional request by hand and
// checks each refusal is the one Kafka answers.
func TestTxnProtocolErrors(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("pt", 2)
	r := n.raw()

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.SetVersion(4)
	empty := ""
	ip.TransactionalID, ip.TransactionTimeoutMillis = &empty, 1000
	wantCode(t, "init with an empty id", r.do(ip).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.InvalidRequest)
	long := "long"
	ip.TransactionalID, ip.TransactionTimeoutMillis = &long, 16*60*1000
	wantCode(t, "init with a timeout over the maximum", r.do(ip).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.InvalidTransactionTimeout)

	x := initTxnRaw(t, r, "p")
	wantCode(t, "end with nothing open", x.end(x.epoch, true), kerr.InvalidTxnState)
	wantCode(t, "produce before add", x.produce("pt", 0, x.epoch, 0), kerr.InvalidTxnState)
	wantCode(t, "add with a wrong producer id", x.add(x.pid+7, x.epoch, "pt", 0)[0], kerr.InvalidProducerIDMapping)
	wantCode(t, "add with an old epoch", x.add(x.pid, x.epoch-1, "pt", 0)[0], kerr.ProducerFenced)
	codes := x.add(x.pid, x.epoch, "nope", 0)
	wantCode(t, "add an unknown topic", codes[0], kerr.UnknownTopicOrPartition)
	codes = x.add(x.pid, x.epoch, "pt", 0, 9)
	wantCode(t, "add with an unknown partition: the known one", codes[0], kerr.OperationNotAttempted)
	wantCode(t, "add with an unknown partition: the unknown one", codes[1], kerr.UnknownTopicOrPartition)
	wantCode(t, "add", x.add(x.pid, x.epoch, "pt", 0)[0], nil)
	wantCode(t, "produce to a partition not added", x.produce("pt", 1, x.epoch, 0), kerr.InvalidTxnState)
	wantCode(t, "produce", x.produce("pt", 0, x.epoch, 0), nil)

	// verify_only (v4+, KIP-890): the broker's question.
	av := kmsg.NewPtrAddPartitionsToTxnRequest()
	av.SetVersion(4)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "p", x.pid, x.epoch, true
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "pt", Partitions: []int32{0, 1}}}
	av.Transactions = append(av.Transactions, tx)
	vr := r.do(av).(*kmsg.AddPartitionsToTxnResponse)
	if ps := vr.Transactions[0].Topics[0].Partitions; vr.ErrorCode != 0 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Errorf("verify_only: %+v", vr)
	}

	// Offsets inside the transaction.
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.SetVersion(3)
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = "p", "g", x.pid, x.epoch, -1
	tct := kmsg.NewTxnOffsetCommitRequestTopic()
	tct.Topic = "pt"
	tcp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tcp.Partition, tcp.Offset = 0, 42
	tct.Partitions = append(tct.Partitions, tcp)
	tc.Topics = append(tc.Topics, tct)
	wantCode(t, "txn offset commit before AddOffsetsToTxn", r.do(tc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.InvalidTxnState)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.SetVersion(3)
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "p", x.pid, x.epoch, "g"
	wantCode(t, "add offsets", r.do(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, nil)
	wantCode(t, "txn offset commit", r.do(tc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, nil)
	fetchOffset := func(stable bool) (int64, int16) {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.SetVersion(7)
		of.Group, of.RequireStable = "g", stable
		ot := kmsg.NewOffsetFetchRequestTopic()
		ot.Topic, ot.Partitions = "pt", []int32{0}
		of.Topics = append(of.Topics, ot)
		p := r.do(of).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if off, code := fetchOffset(false); off != -1 || code != 0 {
		t.Errorf("offset visible before commit: %d %v", off, kerr.ErrorForCode(code))
	}
	if _, code := fetchOffset(true); code != kerr.UnstableOffsetCommit.Code {
		t.Errorf("require_stable during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}

	// Describe and list.
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"p", "unknown"}
	ds := r.do(dt).(*kmsg.DescribeTransactionsResponse).TransactionStates
	if len(ds) != 2 || ds[0].State != "Ongoing" || ds[0].ProducerID != x.pid || len(ds[0].Topics) != 1 ||
		ds[0].StartTimestamp <= 0 || ds[1].ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Errorf("describe: %+v", ds)
	}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.SetVersion(1)
	lt.StateFilters, lt.DurationFilterMillis = []string{"Ongoing", "Bogus"}, -1
	ls := r.do(lt).(*kmsg.ListTransactionsResponse)
	if ls.ErrorCode != 0 || len(ls.TransactionStates) != 1 || ls.TransactionStates[0].TransactionalID != "p" ||
		len(ls.UnknownStateFilters) != 1 || ls.UnknownStateFilters[0] != "Bogus" {
		t.Errorf("list: %+v", ls)
	}

	// DescribeProducers names the open transaction's first offset.
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "pt", Partitions: []int32{0}}}
	if aps := r.do(dp).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ActiveProducers; len(aps) != 1 || aps[0].CurrentTxnStartOffset != 0 {
		t.Errorf("describe producers: %+v, want the open transaction at offset 0", aps)
	}

	// Commit: the offset becomes visible; the epoch stays.
	wantCode(t, "commit", x.end(x.epoch, true), nil)
	wantCode(t, "commit again (a retry)", x.end(x.epoch, true), nil)
	wantCode(t, "abort after commit", x.end(x.epoch, false), kerr.InvalidTxnState)
	if off, code := fetchOffset(true); off != 42 || code != 0 {
		t.Errorf("offset after commit: %d %v, want 42", off, kerr.ErrorForCode(code))
	}

	// A second producer fences the first.
	y := initTxnRaw(t, n.raw(), "p")
	if y.pid != x.pid || y.epoch != x.epoch+1 {
		t.Fatalf("re-init: %d/%d after %d/%d", y.pid, y.epoch, x.pid, x.epoch)
	}
	wantCode(t, "zombie add", x.add(x.pid, x.epoch, "pt", 0)[0], kerr.ProducerFenced)
	wantCode(t, "zombie end", x.end(x.epoch, false), kerr.ProducerFenced)
	if code := x.produce("pt", 0, x.epoch, 1); code != kerr.InvalidProducerEpoch.Code && code != kerr.ProducerFenced.Code {
		t.Errorf("zombie produce: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	// KIP-360: re-init naming an epoch not held is fenced.
	ip.SetVersion(4)
	pname := "p"
	ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = &pname, 1000, x.pid, x.epoch
	wantCode(t, "re-init with a stale epoch", r.do(ip).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.ProducerFenced)
}

// seedTxnAPIs are populated requests of the transactional APIs, for
// FuzzDispatch: a transactional init, adds (v3 and v4 verify_only),
// offsets (v6 by topic id, v5 and v4 by name), transactional produces
// (v9, and v12 of KIP-890 part 2), EndTxn (v5 and v4), describe and list.
func seedTxnAPIs() []seedRequest {
	at := func(req kmsg.Request, v int16) seedRequest {
		req.SetVersion(v)
		return seedRequest{req.Key(), v, req.AppendTo(nil)}
	}
	id := "fz-txn"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 1000
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID = id
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "fz", Partitions: []int32{0, 1}}}
	av := kmsg.NewPtrAddPartitionsToTxnRequest()
	av.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: id, VerifyOnly: true,
		Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "fz", Partitions: []int32{0}}}}}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.Group = id, "g1"
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group = id, "g1"
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "fz", TopicID: [16]byte{1}, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.Commit = id, true
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{id, "other"}
	lt := kmsg.NewPtrListTransactionsRequest()
	pat := "fz.*"
	lt.StateFilters, lt.TransactionalIDPattern = []string{"Ongoing", "bogus"}, &pat
	raw, _ := batch.Build([]batch.Record{{Timestamp: 1, Value: []byte("v")}},
		batch.Options{Producer: &batch.Producer{ID: 0, Epoch: 0}, Transactional: true})
	pr := produceReq(9, -1, "fz", 0, raw)
	pr.TransactionID = &id
	pr12 := produceReq(12, -1, "fz", 1, raw) // KIP-890 part 2: adds its partition
	pr12.TransactionID = &id
	return []seedRequest{
		at(ip, apis[22].max), at(ap, 3), at(av, apis[24].max), at(ao, apis[25].max), at(tc, apis[28].max),
		{0, 9, pr.AppendTo(nil)}, {0, 12, pr12.AppendTo(nil)}, at(et, apis[26].max), at(dt, 0), at(lt, apis[66].max),
		at(et, 4), at(tc, 5), at(tc, 4), at(ao, 3), // the older versions, beside the maximums
	}
}
