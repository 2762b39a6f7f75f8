package sqs

import (
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
	name, err := c.queueName(in.QueueURL)
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
	for _, e := range in.Entries {
		si, res, err := h.sendInput(c, s, e)
		if err != nil {
			out.Failed = append(out.Failed, failedEntry(e.ID, err))
			continue
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
	for i, r := range results {
		if r.Err != nil {
			out.Failed = append(out.Failed, failedEntry(pending[i].ID, r.Err))
			continue
		}
		out.Successful = append(out.Successful, sendBatchSuccess{sendResult: pending[i].with(r, s.FIFO)})
	}
	return out, nil
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
