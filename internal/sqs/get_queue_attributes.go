package sqs

func init() { register("GetQueueAttributes", handle(getQueueAttributes)) }

type getQueueAttributesInput struct {
	QueueURL       string   `json:"QueueUrl"`
	AttributeNames []string `json:"AttributeNames"`
}

func (in *getQueueAttributesInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	in.AttributeNames = f.list("AttributeName")
	return nil
}

type getQueueAttributesOutput struct {
	Attributes attrMap `json:"Attributes,omitempty" xml:"Attribute"`
}

// getQueueAttributes answers the named attributes; with none named, none
// (as SQS does), so clients must ask for "All".
func getQueueAttributes(h *Handler, c *call, in *getQueueAttributesInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	st, err := h.b.QueueStats(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	attrs, err := h.queueAttributes(s, st, in.AttributeNames)
	if err != nil {
		return nil, err
	}
	return getQueueAttributesOutput{attrs}, nil
}
