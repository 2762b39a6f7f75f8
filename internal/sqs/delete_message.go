package sqs

import (
	"context"
	"errors"

	"github.com/sluice-mq/sluice/internal/broker"
)

func init() { register("DeleteMessage", handle(deleteMessage)) }

type deleteMessageInput struct {
	QueueURL      string `json:"QueueUrl"`
	ReceiptHandle string `json:"ReceiptHandle"`
}

func (in *deleteMessageInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	in.ReceiptHandle = f.str("ReceiptHandle")
	return nil
}

func deleteMessage(h *Handler, c *call, in *deleteMessageInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if in.ReceiptHandle == "" {
		return nil, missing("ReceiptHandle")
	}
	c.traceDeleted(1)
	return nil, h.ack(c.ctx, name, in.ReceiptHandle)
}

// ack deletes a message the way SQS's DeleteMessage does. A stale receipt
// (the message was received again since, or is already deleted) succeeds
// and deletes nothing: SQS documents exactly that, and SDK code retries
// deletes expecting it. The broker refuses stale receipts (ErrReceiptStale)
// so that native clients learn their lease was lost; here that refusal
// becomes success, which is safe because it changed nothing. A receipt that
// is not one sluice issued is ReceiptHandleIsInvalid.
func (h *Handler) ack(ctx context.Context, queue, receipt string) error {
	return ackResult(receipt, h.ackOne(ctx, queue, receipt))
}

// ackResult maps the broker's answer to one delete.
func ackResult(receipt string, err error) error {
	switch {
	case err == nil, errors.Is(err, broker.ErrReceiptStale):
		return nil
	case errors.Is(err, broker.ErrReceiptInvalid):
		return invalidReceipt(receipt)
	}
	return toAPIError(err)
}

func invalidReceipt(receipt string) *apiError {
	if len(receipt) > 128 {
		receipt = receipt[:128] + "…"
	}
	return newError(errReceiptInvalid, "The input receipt handle \"%s\" is not a valid receipt handle.", receipt)
}
