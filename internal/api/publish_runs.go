package api

import (
	"context"
	"errors"
	"strconv"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// A run is consecutive Publish requests for one destination, stored with one
// broker call. Each entry keeps its own answer: an entry the API refuses is
// left out of the call, and a refusal the broker gives for the call as a
// whole because of one entry is told apart (below) so its neighbours are
// still stored.

// entryAt locates a merged entry: request resps[req], entry idx.
type entryAt struct {
	resp *sluicev1.PublishResponse
	idx  int
}

// produceRun places the records of reqs (all for topic) in the topic's
// partitions, in their order, and returns what answers them once they are
// durable (nil if they are answered already: refused, or stored one by
// one).
func (s *streamService) produceRun(ctx context.Context, topic string, reqs []*sluicev1.PublishRequest, resps []*sluicev1.PublishResponse) func(context.Context) {
	var recs []broker.ProduceRecord
	var where []entryAt
	for i, r := range reqs {
		for j, rec := range r.GetRecords() {
			br, err := produceRecord(j, rec, topic)
			if err != nil {
				resps[i].Results[j] = &sluicev1.PublishResult{Error: publishError(s.API, err)}
				continue
			}
			recs = append(recs, br)
			where = append(where, entryAt{resps[i], j})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	placed, err := s.b.PlaceProduce(ctx, topic, recs, broker.ProduceOptions{})
	if err != nil && len(recs) > 1 && refusedBeforeWrite(err) {
		// One record spoiled the call before anything was written: store
		// each by itself, in order, so only that one is refused. (Each
		// waits for its sync before the next is placed: the order holds,
		// and this path is for bad input only.)
		for k := range recs {
			r, err := s.b.Produce(ctx, topic, recs[k:k+1], broker.ProduceOptions{})
			s.answerRecord(where[k], r, err, topic)
		}
		return nil
	}
	if err != nil {
		for k := range recs {
			s.answerRecord(where[k], nil, err, topic)
		}
		return nil
	}
	return func(ctx context.Context) {
		res, err := placed.Wait(ctx)
		for k := range recs {
			var r []broker.ProduceResult
			if err == nil && k < len(res) {
				r = res[k : k+1]
			}
			s.answerRecord(where[k], r, err, topic)
		}
	}
}

// refusedBeforeWrite reports whether Produce refused a call in its routing,
// before any partition was written: a record too large, without the key a
// compacted topic needs, or for a partition that does not exist.
func refusedBeforeWrite(err error) bool {
	return errors.Is(err, broker.ErrRecordTooLarge) || errors.Is(err, broker.ErrKeyRequired) ||
		errors.Is(err, broker.ErrUnknownPartition)
}

func (s *streamService) answerRecord(at entryAt, res []broker.ProduceResult, err error, topic string) {
	if err == nil && len(res) == 0 {
		err = errors.New("produce answered no result")
	}
	if err != nil {
		at.resp.Results[at.idx] = &sluicev1.PublishResult{Error: publishError(s.API, withMeta(err, tmeta(topic)))}
		return
	}
	r := res[0]
	at.resp.Results[at.idx] = &sluicev1.PublishResult{Record: &sluicev1.ProduceResult{
		Partition: r.Partition, Offset: r.Offset, Timestamp: ts(r.Timestamp)}}
}

// sendRun sends the messages of reqs (all for queue) in their order.
func (s *streamService) sendRun(ctx context.Context, queue string, reqs []*sluicev1.PublishRequest, resps []*sluicev1.PublishResponse) {
	settings, err := s.b.GetQueue(queue)
	if err != nil {
		e := publishError(s.API, withMeta(err, qmeta(queue)))
		for _, r := range resps {
			failAll(r, e)
		}
		return
	}
	var ins []broker.SendInput
	var where []entryAt
	for i, r := range reqs {
		for j, e := range r.GetMessages() {
			meta := qmeta(queue)
			meta["index"] = strconv.Itoa(j)
			in, err := sendInput(e)
			if err == nil {
				s.traceSend(ctx, &in)
				err = precheck(settings, in, meta)
			}
			if err != nil {
				resps[i].Results[j] = &sluicev1.PublishResult{Error: publishError(s.API, err)}
				continue
			}
			ins = append(ins, in)
			where = append(where, entryAt{resps[i], j})
		}
	}
	if len(ins) == 0 {
		return
	}
	res, err := s.b.Send(ctx, queue, ins)
	for k, at := range where {
		switch {
		case err != nil:
			at.resp.Results[at.idx] = &sluicev1.PublishResult{Error: publishError(s.API, withMeta(err, qmeta(queue)))}
		case k >= len(res):
			at.resp.Results[at.idx] = &sluicev1.PublishResult{Error: publishError(s.API, errors.New("send answered too few results"))}
		case res[k].Err != nil:
			at.resp.Results[at.idx] = &sluicev1.PublishResult{Error: publishError(s.API, withMeta(res[k].Err, qmeta(queue)))}
		default:
			at.resp.Results[at.idx] = &sluicev1.PublishResult{Message: sendResultToProto(res[k])}
		}
	}
}

// metaError carries the request's subjects to toConnect.
type metaError struct {
	error
	meta map[string]string
}

func (e metaError) Unwrap() error { return e.error }

func withMeta(err error, meta map[string]string) error { return metaError{err, meta} }
