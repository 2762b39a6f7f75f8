package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/client/inbox"
)

// Event is one outbox row on its way to the broker.
type Event struct {
	ID      int64  // the row's id: the claim's order, never a position
	EventID string // the application's id of the event, unique in the table
	Key     string // topic key, or FIFO group id; "" when NULL
	Payload []byte
	Headers map[string]string // the headers column, a JSON object of strings
}

// Publisher hands events to the broker and returns only once the broker
// has made every one durable (its ack); an error means some may have been
// stored and some not, and the relay publishes them all again.
type Publisher interface {
	Publish(ctx context.Context, evs []Event) error
}

// decodeHeaders reads the headers column: NULL, or a JSON object whose
// values are strings. A row with anything else is refused, not relayed
// with its headers silently dropped.
func decodeHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("headers: want a JSON object of strings: %w", err)
	}
	return h, nil
}

// NewPublisher returns the publisher of cfg's destination over c, the
// native API's public client. For a queue it asks the broker whether the
// queue is FIFO (then every message carries a group and the event id as
// its deduplication id).
func NewPublisher(ctx context.Context, c *client.Client, cfg Config) (Publisher, error) {
	if cfg.Topic != "" {
		if _, err := c.DescribeTopic(ctx, cfg.Topic); err != nil {
			return nil, fmt.Errorf("outbox: topic %q: %w", cfg.Topic, err)
		}
		return &topicPublisher{c: c, topic: cfg.Topic}, nil
	}
	q, err := c.GetQueue(ctx, cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("outbox: queue %q: %w", cfg.Queue, err)
	}
	return &queuePublisher{c: c, queue: cfg.Queue, fifo: q.GetConfig().GetFifo(), group: cfg.DefaultGroup}, nil
}

// maxSendBatch is SendBatch's limit (queue.proto).
const maxSendBatch = 100

type queuePublisher struct {
	c     *client.Client
	queue string
	fifo  bool
	group string // FIFO group of a row without a key
}

func (p *queuePublisher) entry(ev Event) *client.SendEntry {
	opts := []client.SendOption{client.WithAttribute(inbox.EventIDKey, "String", []byte(ev.EventID))}
	for _, k := range slices.Sorted(maps.Keys(ev.Headers)) {
		opts = append(opts, client.WithAttribute(k, "String", []byte(ev.Headers[k])))
	}
	if p.fifo {
		g := ev.Key
		if g == "" {
			g = p.group
		}
		// The event id as deduplication id: a republish within the queue's
		// dedup window is dropped by the broker itself.
		opts = append(opts, client.WithGroupID(g), client.WithDeduplicationID(ev.EventID))
	}
	return client.Entry(ev.Payload, opts...)
}

func (p *queuePublisher) Publish(ctx context.Context, evs []Event) error {
	for len(evs) > 0 {
		n := min(len(evs), maxSendBatch)
		entries := make([]*client.SendEntry, n)
		for i := range n {
			entries[i] = p.entry(evs[i])
		}
		res, err := p.c.SendBatch(ctx, p.queue, entries)
		if err != nil {
			return err
		}
		if len(res) != n {
			return fmt.Errorf("outbox: SendBatch answered %d results for %d messages", len(res), n)
		}
		evs = evs[n:]
	}
	return nil
}

// maxProduceBatch bounds one Produce request of the relay.
const maxProduceBatch = 500

type topicPublisher struct {
	c     *client.Client
	topic string
}

func (p *topicPublisher) Publish(ctx context.Context, evs []Event) error {
	for len(evs) > 0 {
		n := min(len(evs), maxProduceBatch)
		recs := make([]*client.ProduceRecord, n)
		for i, ev := range evs[:n] {
			r := &client.ProduceRecord{Value: ev.Payload, Headers: []*client.Header{{Key: inbox.EventIDKey, Value: []byte(ev.EventID)}}}
			if ev.Key != "" {
				r.Key = []byte(ev.Key)
			}
			for _, k := range slices.Sorted(maps.Keys(ev.Headers)) {
				r.Headers = append(r.Headers, &client.Header{Key: k, Value: []byte(ev.Headers[k])})
			}
			recs[i] = r
		}
		res, err := p.c.Produce(ctx, p.topic, recs, nil)
		if err != nil {
			return err
		}
		if len(res) != n {
			return errors.New("outbox: Produce answered fewer results than records")
		}
		evs = evs[n:]
	}
	return nil
}
