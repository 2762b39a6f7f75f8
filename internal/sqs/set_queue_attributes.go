package sqs

import "github.com/sluice-mq/sluice/internal/broker"

func init() { register("SetQueueAttributes", handle(setQueueAttributes)) }

type setQueueAttributesInput struct {
	QueueURL   string            `json:"QueueUrl"`
	Attributes map[string]string `json:"Attributes"`
}

func (in *setQueueAttributesInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	in.Attributes = f.pairs("Attribute", "Name", "Value")
	return nil
}

// setQueueAttributes validates every attribute before changing any, so a
// bad one changes nothing. Changes apply at once (SQS takes up to a minute).
func setQueueAttributes(h *Handler, c *call, in *setQueueAttributesInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if len(in.Attributes) == 0 {
		return nil, missing("Attribute.1.Name")
	}
	cur, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	// Work on a copy: checking a redrive target asks the broker, which the
	// update callback (run under the broker's lock) must not do.
	before := cur.DeadLetterQueue
	if err := h.applyAttributes(&cur, in.Attributes, false); err != nil {
		return nil, err
	}
	if err := h.allowDeadLetter(c, before, cur.DeadLetterQueue); err != nil {
		return nil, err
	}
	_, err = h.b.UpdateQueue(name, func(s *broker.QueueSettings) {
		tags, extra := s.Tags, s.Extra
		*s = cur
		s.Tags, s.Extra = tags, extra
		for k, v := range cur.Extra {
			if s.Extra == nil {
				s.Extra = map[string]string{}
			}
			s.Extra[k] = v
		}
	})
	if err != nil {
		return nil, toAPIError(err)
	}
	return nil, nil
}
