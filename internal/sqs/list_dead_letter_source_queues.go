package sqs

func init() { register("ListDeadLetterSourceQueues", handle(listDeadLetterSourceQueues)) }

type listDLQSourcesInput struct {
	QueueURL   string `json:"QueueUrl"`
	NextToken  string `json:"NextToken"`
	MaxResults *int   `json:"MaxResults"`
}

func (in *listDLQSourcesInput) fromQuery(f form) (err error) {
	in.QueueURL = f.str("QueueUrl")
	in.NextToken = f.str("NextToken")
	in.MaxResults, err = f.intp("MaxResults")
	return err
}

type listDLQSourcesOutput struct {
	QueueURLs []string `json:"queueUrls" xml:"QueueUrl"`
	NextToken string   `json:"NextToken,omitempty" xml:"NextToken,omitempty"`
}

func listDeadLetterSourceQueues(h *Handler, c *call, in *listDLQSourcesInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if _, err := h.b.GetQueue(name); err != nil {
		return nil, toAPIError(err)
	}
	names, next, err := page(h.visible(c, h.deadLetterSources(name)), in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	out := listDLQSourcesOutput{QueueURLs: []string{}, NextToken: next}
	for _, n := range names {
		out.QueueURLs = append(out.QueueURLs, h.queueURL(c, n))
	}
	return out, nil
}

// deadLetterSources lists, sorted, the queues whose dead-letter queue is
// name.
func (h *Handler) deadLetterSources(name string) []string {
	return h.b.DeadLetterSources(name)
}
