package sqs

import (
	"regexp"

	"github.com/sluice-mq/sluice/internal/broker"
)

func init() { register("CreateQueue", handle(createQueue)) }

type createQueueInput struct {
	QueueName  string            `json:"QueueName"`
	Attributes map[string]string `json:"Attributes"`
	Tags       map[string]string `json:"tags"`
}

func (in *createQueueInput) fromQuery(f form) error {
	in.QueueName = f.str("QueueName")
	in.Attributes = f.pairs("Attribute", "Name", "Value")
	in.Tags = f.pairs("Tag", "Key", "Value")
	return nil
}

type queueURLOutput struct {
	QueueURL string `json:"QueueUrl" xml:"QueueUrl"`
}

var queueNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// checkQueueName applies SQS's rule: 1 to 80 letters, digits, '-' and '_',
// plus ".fifo" for a FIFO queue (which counts towards the 80).
func checkQueueName(name string, fifo bool) error {
	base := name
	if fifo {
		if len(name) < 6 || name[len(name)-5:] != ".fifo" {
			return newError(errInvalidParameter, "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
		}
		base = name[:len(name)-5]
	}
	if !queueNameRE.MatchString(base) || len(name) > broker.MaxNameLength {
		return newError(errInvalidParameter, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	return nil
}

func createQueue(h *Handler, c *call, in *createQueueInput) (any, error) {
	if in.QueueName == "" {
		return nil, missing("QueueName")
	}
	if err := h.allow(c, c.action, in.QueueName); err != nil {
		return nil, err
	}
	s := broker.QueueSettings{Name: in.QueueName, Tags: in.Tags}
	if err := h.applyAttributes(&s, in.Attributes, true); err != nil {
		return nil, err
	}
	if err := h.allowDeadLetter(c, "", s.DeadLetterQueue); err != nil {
		return nil, err
	}
	if err := checkQueueName(in.QueueName, s.FIFO); err != nil {
		return nil, err
	}
	if len(in.Tags) > maxTags {
		return nil, tooManyTags()
	}
	created, err := h.b.CreateQueue(s)
	if err != nil {
		return nil, toAPIError(err)
	}
	return queueURLOutput{h.queueURL(c, created.Name)}, nil
}
