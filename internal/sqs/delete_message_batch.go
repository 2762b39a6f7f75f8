package sqs

import "encoding/xml"

func init() { register("DeleteMessageBatch", handle(deleteMessageBatch)) }

type receiptEntry struct {
	ID                string `json:"Id"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

func receiptEntries(f form, prefix string) ([]receiptEntry, error) {
	var out []receiptEntry
	for _, g := range f.indexed(prefix) {
		e := receiptEntry{ID: g.str("Id"), ReceiptHandle: g.str("ReceiptHandle")}
		var err error
		if e.VisibilityTimeout, err = g.intp("VisibilityTimeout"); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

type receiptBatchInput struct {
	QueueURL string         `json:"QueueUrl"`
	Entries  []receiptEntry `json:"Entries"`
}

type deleteBatchInput struct{ receiptBatchInput }

func (in *deleteBatchInput) fromQuery(f form) (err error) {
	in.QueueURL = f.str("QueueUrl")
	in.Entries, err = receiptEntries(f, "DeleteMessageBatchRequestEntry")
	return err
}

type deleteBatchSuccess struct {
	batchID
	XMLName xml.Name `json:"-" xml:"DeleteMessageBatchResultEntry"`
}

type deleteMessageBatchOutput struct {
	Successful []deleteBatchSuccess `json:"Successful"`
	Failed     []batchError         `json:"Failed"`
}

func deleteMessageBatch(h *Handler, c *call, in *deleteBatchInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := checkBatchIDs("DeleteMessageBatch", entryIDs(in.Entries)); err != nil {
		return nil, err
	}
	out := deleteMessageBatchOutput{Successful: []deleteBatchSuccess{}, Failed: []batchError{}}
	// One broker call acks every entry with a receipt in one journal write;
	// it also answers for a queue that does not exist, so only a batch
	// without receipts needs to look the queue up (a lookup takes the
	// queue's lock, which every send to it takes too).
	var receipts []string
	for _, e := range in.Entries {
		if e.ReceiptHandle != "" {
			receipts = append(receipts, e.ReceiptHandle)
		}
	}
	c.traceDeleted(len(receipts))
	var results []error
	if len(receipts) > 0 {
		results, err = h.ackMany(c.ctx, name, receipts)
	} else {
		err = h.exists(name)
	}
	if err != nil {
		return nil, toAPIError(err)
	}
	for _, e := range in.Entries {
		var err error = missing("ReceiptHandle")
		if e.ReceiptHandle != "" {
			err, results = ackResult(e.ReceiptHandle, results[0]), results[1:]
		}
		if err != nil {
			out.Failed = append(out.Failed, failedEntry(e.ID, err))
			continue
		}
		out.Successful = append(out.Successful, deleteBatchSuccess{batchID: batchID{e.ID}})
	}
	return out, nil
}

func entryIDs(es []receiptEntry) []string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return ids
}
