package tcptransport

import "sync/atomic"

// Stats are a transport's counters since it started: the seam for internal/metrics, which
// reads them at scrape time.
type Stats struct {
	// Outbound.
	BatchesSent  uint64 // batches written to a peer's connection
	MessagesSent uint64
	FramesSent   uint64
	Writes       uint64 // coalesced writes (a large one goes in 64 KiB pieces): BatchesSent/Writes is the coalescing
	BytesSent    uint64 // frame bytes written (handshakes not counted)
	// Dropped counts batches lost on this side: a full queue, an unknown peer, a peer that
	// could not be reached, or a write that failed. DroppedMessages counts messages left
	// out of a batch because one alone was larger than MaxFrame.
	Dropped         uint64
	DroppedMessages uint64
	Dials           uint64 // connection attempts
	DialFailures    uint64 // attempts that failed to connect or were refused
	Reconnects      uint64 // connections established after a previous one to that peer

	// Inbound.
	BatchesReceived  uint64 // frames handed to the receiver
	MessagesReceived uint64
	BytesReceived    uint64 // frame bytes read
	Refused          uint64 // inbound connections refused at the handshake
	BadFrames        uint64 // inbound connections closed for an oversized, corrupt or undecodable frame

	// Requests (requests.go).
	RequestsSent    uint64 // requests written to a peer
	RequestFailures uint64 // requests that got no answer, or an error answer
	RequestsServed  uint64 // peers' requests handed to the receiver

	// Byte streams (streams.go).
	StreamsDialled  uint64 // streams this node opened to a peer
	StreamsAccepted uint64 // streams peers opened, handed to Config.Streams
}

type counters struct {
	batchesSent, messagesSent, framesSent, writes, bytesSent atomic.Uint64
	dropped, droppedMessages                                 atomic.Uint64
	dials, dialFailures, reconnects                          atomic.Uint64
	batchesReceived, messagesReceived, bytesReceived         atomic.Uint64
	refused, badFrames                                       atomic.Uint64
	requestsSent, requestFailures, requestsServed            atomic.Uint64
	streamsDialled, streamsAccepted                          atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		BatchesSent: c.batchesSent.Load(), MessagesSent: c.messagesSent.Load(),
		FramesSent: c.framesSent.Load(), Writes: c.writes.Load(), BytesSent: c.bytesSent.Load(),
		Dropped: c.dropped.Load(), DroppedMessages: c.droppedMessages.Load(),
		Dials: c.dials.Load(), DialFailures: c.dialFailures.Load(), Reconnects: c.reconnects.Load(),
		BatchesReceived: c.batchesReceived.Load(), MessagesReceived: c.messagesReceived.Load(),
		BytesReceived: c.bytesReceived.Load(), Refused: c.refused.Load(), BadFrames: c.badFrames.Load(),
		RequestsSent: c.requestsSent.Load(), RequestFailures: c.requestFailures.Load(),
		RequestsServed: c.requestsServed.Load(),
		StreamsDialled: c.streamsDialled.Load(), StreamsAccepted: c.streamsAccepted.Load(),
	}
}

// RefusedTotal is how many connections the listener refused (a failed TLS handshake, not
// a sluice peer, another cluster, a node not admitted) since the transport started: each
// is counted, while the log warns of them at most once a refuseLogEvery.
func (t *Transport) RefusedTotal() uint64 { return t.stats.refused.Load() }
