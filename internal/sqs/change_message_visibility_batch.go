package sqs

import "encoding/xml"

func init() { register("ChangeMessageVisibilityBatch", handle(changeMessageVisibilityBatch)) }

type changeVisibilityBatchInput struct{ receiptBatchInput }

func (in *changeVisibilityBatchInput) fromQuery(f form) (err error) {
	in.QueueURL = f.str("QueueUrl")
	in.Entries, err = receiptEntries(f, "ChangeMessageVisibilityBatchRequestEntry")
	return err
}

type changeVisibilityBatchSuccess struct {
	batchID
	XMLName xml.Name `json:"-" xml:"ChangeMessageVisibilityBatchResultEntry"`
}

type changeVisibilityBatchOutput struct {
	Successful []changeVisibilityBatchSuccess `json:"Successful"`
	Failed     []batchError                   `json:"Failed"`
}

func changeMessageVisibilityBatch(h *Handler, c *call, in *changeVisibilityBatchInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := checkBatchIDs("ChangeMessageVisibilityBatch", entryIDs(in.Entries)); err != nil {
		return nil, err
	}
	if err := h.exists(name); err != nil {
		return nil, toAPIError(err)
	}
	out := changeVisibilityBatchOutput{Successful: []changeVisibilityBatchSuccess{}, Failed: []batchError{}}
	for _, e := range in.Entries {
		if err := h.changeVisibility(c.ctx, name, e.ReceiptHandle, e.VisibilityTimeout); err != nil {
			out.Failed = append(out.Failed, failedEntry(e.ID, err))
			continue
		}
		out.Successful = append(out.Successful, changeVisibilityBatchSuccess{batchID: batchID{e.ID}})
	}
	return out, nil
}
