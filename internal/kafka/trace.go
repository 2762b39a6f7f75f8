package kafka

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/telemetry"
)

// Tracing (docs/kafka.md, "Trace context"). A Kafka request carries no
// trace context of its own; a record's is its traceparent header (with
// tracestate), as the OpenTelemetry Kafka instrumentations write it, and it
// is stored and fetched with the record, byte for byte. With
// Config.Tracer set, Produce gets a span per partition (linked to, or with
// a single record the child of, each record's context), Fetch and
// OffsetCommit one per request (a fetch that returned nothing gets none). With it unset serveTraced is the handler
// call and nothing else.

// serveTraced runs the handler of key and records its span.
func (c *conn) serveTraced(ctx context.Context, key int16, req kmsg.Request) (reply, error) {
	fn := apis[key].fn
	if !c.s.cfg.Tracer.Enabled() {
		return fn(ctx, c, req)
	}
	start := time.Now()
	rep, err := fn(ctx, c, req)
	if err == nil {
		c.recordSpans(start, req, rep.msg, rep.fetch)
	}
	return rep, err
}

// recordSpans records the spans of one answered request.
func (c *conn) recordSpans(start time.Time, req kmsg.Request, resp kmsg.Response, fetch *fetchReply) {
	t := c.s.cfg.Tracer
	if !t.Enabled() {
		return
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		pr, _ := resp.(*kmsg.ProduceResponse)
		for i, tp := range r.Topics {
			if tp.Topic == "" { // v13+: named by id
				tp.Topic, _ = c.topicNameByID(tp.TopicID)
			}
			for j, p := range tp.Partitions {
				sp := &telemetry.Span{System: telemetry.SystemKafka, Op: "produce", Type: telemetry.TypeSend, Dest: tp.Topic, Start: start,
					Attrs: []attribute.KeyValue{attribute.String("messaging.destination.partition.id", strconv.Itoa(int(p.Partition)))}}
				sp.Messages, sp.Count = recordContexts(p.Records)
				sp.Batch = true
				if pr != nil && i < len(pr.Topics) && j < len(pr.Topics[i].Partitions) {
					sp.Err = codeErr(pr.Topics[i].Partitions[j].ErrorCode)
				}
				t.Record(sp)
			}
		}
	case *kmsg.FetchRequest:
		if fetch == nil {
			return
		}
		sp := &telemetry.Span{System: telemetry.SystemKafka, Op: "fetch", Type: telemetry.TypeReceive, Start: start}
		var bytes int64
		parts := 0
		for _, ft := range fetch.topics {
			if len(fetch.topics) == 1 {
				sp.Dest = ft.name
			}
			for _, p := range ft.parts {
				parts++
				bytes += p.sec.Length
				if sp.Err == nil {
					sp.Err = codeErr(p.code)
				}
			}
		}
		if bytes == 0 && sp.Err == nil {
			// An empty long poll: consumers send one every few seconds
			// per connection; a span for each would bury the ones that
			// carried records.
			return
		}
		sp.Attrs = []attribute.KeyValue{attribute.Int("sluice.fetch.partitions", parts), attribute.Int64("sluice.fetch.bytes", bytes)}
		t.Record(sp)
	case *kmsg.OffsetCommitRequest:
		sp := &telemetry.Span{System: telemetry.SystemKafka, Op: "commit", Type: telemetry.TypeSettle, Start: start, Batch: true,
			Attrs: []attribute.KeyValue{attribute.String("messaging.consumer.group.name", r.Group)}}
		for _, tp := range r.Topics {
			if len(r.Topics) == 1 {
				sp.Dest = tp.Topic
			}
			sp.Count += len(tp.Partitions)
		}
		if cr, ok := resp.(*kmsg.OffsetCommitResponse); ok {
			for _, tp := range cr.Topics {
				for _, p := range tp.Partitions {
					if sp.Err == nil {
						sp.Err = codeErr(p.ErrorCode)
					}
				}
			}
		}
		t.Record(sp)
	}
}

// recordContexts reads the traceparent headers of a produce request's
// records (only with tracing on: it decodes, and decompresses, every
// batch); a batch that does not decode adds nothing, the broker refused it.
func recordContexts(records []byte) ([]trace.SpanContext, int) {
	batches, err := splitBatches(records)
	if err != nil {
		return nil, 0
	}
	var out []trace.SpanContext
	n := 0
	for _, b := range batches {
		for rec, err := range batch.Records(b) {
			if err != nil {
				break
			}
			n++
			var tp, ts string
			for _, h := range rec.Headers {
				switch h.Key {
				case telemetry.Traceparent:
					tp = string(h.Value)
				case telemetry.Tracestate:
					ts = string(h.Value)
				}
			}
			out = append(out, telemetry.ParseTraceparent(tp, ts))
		}
	}
	return out, n
}

// codeErr is a Kafka error code as a span error (nil for none).
func codeErr(code int16) error {
	if code == 0 {
		return nil
	}
	if e := kerr.ErrorForCode(code); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return telemetry.ErrCode(ke.Message)
		}
	}
	return telemetry.ErrCode("UNKNOWN_SERVER_ERROR")
}
