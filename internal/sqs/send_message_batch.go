package sqs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"

	"github.com/sluice-mq/sluice/internal/broker"
)

func init() { register("SendMessageBatch", handle(sendMessageBatch)) }

type sendMessageBatchInput struct {
	QueueURL string      `json:"QueueUrl"`
	Entries  []sendEntry `json:"Entries"`
}

func (in *sendMessageBatchInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	for _, g := range f.indexed("SendMessageBatchRequestEntry") {
		var e sendEntry
		if err := e.fromForm(g); err != nil {
			return err
		}
		in.Entries = append(in.Entries, e)
	}
	return nil
}

type sendBatchSuccess struct {
	XMLName xml.Name `json:"-" xml:"SendMessageBatchResultEntry"`
	sendResult
}

type sendMessageBatchOutput struct {
	Successful []sendBatchSuccess `json:"Successful"`
	Failed     []batchError       `json:"Failed"`
}

// maxBatchBytes bounds the sum of a batch's message sizes, as in SQS.
const maxBatchBytes = 1 << 20

// sendMessageBatch sends the valid entries in one broker call (one durable
// append); invalid ones fail alone.
func sendMessageBatch(h *Handler, c *call, in *sendMessageBatchInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = e.ID
		total += entrySize(e)
	}
	if err := checkBatchIDs("SendMessageBatch", ids); err != nil {
		return nil, err
	}
	if total > maxBatchBytes {
		return nil, newError(errBatchTooLong, "Batch requests cannot be longer than %d bytes. You have sent %d bytes.", maxBatchBytes, total)
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	out := sendMessageBatchOutput{Successful: []sendBatchSuccess{}, Failed: []batchError{}}
	var inputs []broker.SendInput
	var pending []sendResult
	dupOf := map[int]int{} // pending index → the earlier pending entry it repeats
	first := map[string]int{}
	for _, e := range in.Entries {
		si, res, err := h.sendInput(c, s, e)
		if err != nil {
			out.Failed = append(out.Failed, failedEntry(e.ID, err))
			continue
		}
		if s.FIFO {
			// The broker deduplicates against earlier sends, not within
			// one call; a repeat inside the batch is answered like the
			// entry it repeats, as SQS does.
			key := dedupKey(si)
			if j, ok := first[key]; ok {
				dupOf[len(pending)] = j
				pending = append(pending, res)
				continue
			}
			first[key] = len(pending)
		}
		inputs, pending = append(inputs, si), append(pending, res)
	}
	if len(inputs) == 0 {
		return out, nil
	}
	results, err := h.b.Send(c.ctx, name, inputs)
	if err != nil {
		return nil, toAPIError(err)
	}
	byPending := make([]broker.SendResult, len(pending))
	for i, k := 0, 0; i < len(pending); i++ {
		if j, ok := dupOf[i]; ok {
			byPending[i] = byPending[j]
			continue
		}
		byPending[i] = results[k]
		k++
	}
	for i, r := range byPending {
		if r.Err != nil {
			out.Failed = append(out.Failed, failedEntry(pending[i].ID, r.Err))
			continue
		}
		out.Successful = append(out.Successful, sendBatchSuccess{sendResult: pending[i].with(r, s.FIFO)})
	}
	return out, nil
}

// dedupKey is the deduplication id the broker will give a FIFO input: the
// explicit one, or the body's SHA-256 with content-based deduplication.
func dedupKey(in broker.SendInput) string {
	if in.DedupID != "" {
		return in.DedupID
	}
	sum := sha256.Sum256(in.Body)
	return hex.EncodeToString(sum[:])
}

// entrySize counts an entry as SQS does towards the batch limit: body plus
// attribute names, types and values.
func entrySize(e sendEntry) int {
	n := 0
	if e.MessageBody != nil {
		n += len(*e.MessageBody)
	}
	for name, a := range e.MessageAttributes {
		n += len(name) + len(a.DataType) + len(a.BinaryValue)
		if a.StringValue != nil {
			n += len(*a.StringValue)
		}
	}
	return n
}
