package sqs

func init() { register("DeleteQueue", handle(deleteQueue)) }

// queueInput is the input of actions that name only a queue.
type queueInput struct {
	QueueURL string `json:"QueueUrl"`
}

func (in *queueInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	return nil
}

// deleteQueue deletes at once (SQS takes up to 60 s). The broker refuses to
// delete a queue that is another's dead-letter target; SQS would leave the
// source's policy dangling instead. That refusal is answered as
// InvalidParameterValue.
func deleteQueue(h *Handler, c *call, in *queueInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := h.b.DeleteQueue(name); err != nil {
		return nil, toAPIError(err)
	}
	if h.cfg.Auth != nil {
		h.dropQueueRules(name)
	}
	return nil, nil
}
