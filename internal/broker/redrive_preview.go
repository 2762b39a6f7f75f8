package broker

import "sort"

// previewScanMessages bounds the dead-letter messages one preview looks at:
// past it, the preview says it is incomplete rather than read a huge
// dead-letter queue whole on every click.
const previewScanMessages = 100_000

// RedrivePreview is what a redrive with the same request would move if it
// started now, found by peeking (nothing changes).
type RedrivePreview struct {
	// Count is how many messages would move: the visible ones the filter
	// accepts (FIFO ones behind their group too), capped by the limit.
	Count int64
	// Waiting counts accepted messages in flight or delayed: a redrive
	// ends when it finds nothing visible, so it moves them only if they are
	// visible again before it ends. Not in Count, nor in the sample.
	Waiting int64
	// Examined is how many dead-letter messages were looked at; Complete
	// is false when the scan stopped at its bound before the end, so Count
	// is at least what it says.
	Examined int64
	Complete bool
	// Destinations is how many of Count go to each queue (each message's
	// source queue, or the request's destination).
	Destinations []RedriveDestination
	// Sample is the first of them, in the order a redrive takes them.
	Sample []PeekedMessage
	// Unroutable counts accepted messages with no source queue to return
	// to and no destination named: a redrive of them would fail.
	Unroutable int64
}

// RedriveDestination is one destination of a preview and its count.
type RedriveDestination struct {
	Queue string
	Count int64
}

// PreviewRedrive says what StartRedrive(req) would move now, with up to
// sample of the messages (at most PeekMax), and changes nothing. It checks
// req as StartRedrive does.
func (b *Broker) PreviewRedrive(req RedriveRequest, sample int) (RedrivePreview, error) {
	// Through the catalog and PeekQueue, not the node's own queues: in a cluster the
	// dead-letter queue is replicated (a follower answers NOT_LEADER, and the front-end
	// asks the leader), and a node's own queue map holds none of the replicated ones.
	if _, err := b.GetQueue(req.Source); err != nil {
		return RedrivePreview{}, err
	}
	if req.Destination != "" {
		if _, err := b.GetQueue(req.Destination); err != nil {
			return RedrivePreview{}, err
		}
	}
	if req.RatePerSecond < 0 || req.Limit < 0 || sample < 0 {
		return RedrivePreview{}, invalid("rate", "rate, limit and sample must not be negative")
	}
	sample = min(sample, PeekMax)
	p := RedrivePreview{Complete: true}
	dests := map[string]int64{}
	accepts := func(m *Message) bool {
		return (req.Match == nil || req.Match.accepts(m)) && (req.Filter == nil || req.Filter(m))
	}
	var from int64
	for {
		page, err := b.PeekQueue(req.Source, PeekOptions{From: from, Max: PeekMax})
		if err != nil {
			return RedrivePreview{}, err
		}
		for _, pm := range page.Messages {
			p.Examined++
			if !accepts(pm.Message) {
				continue
			}
			if pm.State == "in_flight" || pm.State == "delayed" {
				p.Waiting++
				continue
			}
			if req.Limit > 0 && p.Count == req.Limit {
				return p.withDestinations(dests), nil
			}
			p.Count++
			dest := req.Destination
			if dest == "" && pm.Message.DeadLetter != nil {
				dest = pm.Message.DeadLetter.SourceQueue
			}
			if dest == "" {
				p.Unroutable++
			} else {
				dests[dest]++
			}
			if len(p.Sample) < sample {
				p.Sample = append(p.Sample, pm)
			}
		}
		if page.Next >= page.End || page.Next == from {
			return p.withDestinations(dests), nil
		}
		if p.Examined >= previewScanMessages {
			p.Complete = false
			return p.withDestinations(dests), nil
		}
		from = page.Next
	}
}

func (p RedrivePreview) withDestinations(dests map[string]int64) RedrivePreview {
	for q, n := range dests {
		p.Destinations = append(p.Destinations, RedriveDestination{Queue: q, Count: n})
	}
	sort.Slice(p.Destinations, func(i, j int) bool { return p.Destinations[i].Queue < p.Destinations[j].Queue })
	return p
}
