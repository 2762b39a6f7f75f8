package sqs

func init() { register("GetQueueUrl", handle(getQueueURL)) }

type getQueueURLInput struct {
	QueueName              string `json:"QueueName"`
	QueueOwnerAWSAccountID string `json:"QueueOwnerAWSAccountId"`
}

func (in *getQueueURLInput) fromQuery(f form) error {
	in.QueueName = f.str("QueueName")
	in.QueueOwnerAWSAccountID = f.str("QueueOwnerAWSAccountId")
	return nil
}

// getQueueURL ignores QueueOwnerAWSAccountId: one sluice is one account.
func getQueueURL(h *Handler, c *call, in *getQueueURLInput) (any, error) {
	if in.QueueName == "" {
		return nil, missing("QueueName")
	}
	if err := h.allow(c, c.action, in.QueueName); err != nil {
		return nil, err
	}
	if _, _, ok := splitSub(in.QueueName); ok {
		if err := h.exists(in.QueueName); err != nil {
			return nil, toAPIError(err)
		}
		return queueURLOutput{h.queueURL(c, in.QueueName)}, nil
	}
	s, err := h.b.GetQueue(in.QueueName)
	if err != nil {
		return nil, toAPIError(err)
	}
	return queueURLOutput{h.queueURL(c, s.Name)}, nil
}
