package sqs

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
)

func init() { register("ChangeMessageVisibility", handle(changeMessageVisibility)) }

type changeVisibilityInput struct {
	QueueURL          string `json:"QueueUrl"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

func (in *changeVisibilityInput) fromQuery(f form) (err error) {
	in.QueueURL = f.str("QueueUrl")
	in.ReceiptHandle = f.str("ReceiptHandle")
	in.VisibilityTimeout, err = f.intp("VisibilityTimeout")
	return err
}

func changeMessageVisibility(h *Handler, c *call, in *changeVisibilityInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	return nil, h.changeVisibility(c.ctx, name, in.ReceiptHandle, in.VisibilityTimeout)
}

// changeVisibility hides a received message for timeout seconds from now (0
// makes it visible at once). Unlike DeleteMessage, a receipt that no longer
// names an in-flight delivery is an error, as in SQS: MessageNotInflight when
// its visibility already ran out, InvalidParameterValue when the message was
// received again or deleted.
func (h *Handler) changeVisibility(ctx context.Context, queue, receipt string, timeout *int) error {
	if receipt == "" {
		return missing("ReceiptHandle")
	}
	if timeout == nil {
		return missing("VisibilityTimeout")
	}
	if *timeout < 0 || *timeout > maxVisibilitySec {
		return invalidValue("VisibilityTimeout", *timeout, "Must be >= 0 and <= 43200")
	}
	err := h.extend(ctx, queue, receipt, time.Duration(*timeout)*time.Second)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, broker.ErrReceiptInvalid):
		return invalidReceipt(receipt)
	case errors.Is(err, broker.ErrReceiptStale):
		return invalidValue("ReceiptHandle", receipt, "Message does not exist or is not available for visibility timeout change")
	case errors.Is(err, broker.ErrExtensionLimit):
		return invalidValue("VisibilityTimeout", *timeout, "Total VisibilityTimeout for the message is beyond the limit [43200 seconds]")
	}
	return toAPIError(err)
}
