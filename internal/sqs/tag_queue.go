package sqs

func init() {
	register("TagQueue", handle(tagQueue))
	register("UntagQueue", handle(untagQueue))
	register("ListQueueTags", handle(listQueueTags))
}

// maxTags is SQS's limit of tags per queue.
const maxTags = 50

func tooManyTags() *apiError {
	return newError(errInvalidParameter, "Too many tags added for queue. A queue can have at most %d tags.", maxTags)
}

type tagQueueInput struct {
	QueueURL string            `json:"QueueUrl"`
	Tags     map[string]string `json:"Tags"`
}

// fromQuery accepts Tag.N.Key (what the SDKs send) and Tags.N.Key.
func (in *tagQueueInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	in.Tags = f.pairs("Tag", "Key", "Value")
	for k, v := range f.pairs("Tags", "Key", "Value") {
		if in.Tags == nil {
			in.Tags = map[string]string{}
		}
		in.Tags[k] = v
	}
	return nil
}

func checkTagKey(k string) error {
	if k == "" || len(k) > 128 {
		return invalidValue("TagKey", k, "Tag keys must be 1 to 128 characters")
	}
	return nil
}

func tagQueue(h *Handler, c *call, in *tagQueueInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if len(in.Tags) == 0 {
		return nil, missing("Tags")
	}
	for k, v := range in.Tags {
		if err := checkTagKey(k); err != nil {
			return nil, err
		}
		if len(v) > 256 {
			return nil, invalidValue("TagValue", v, "Tag values must be at most 256 characters")
		}
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	n := len(s.Tags)
	for k := range in.Tags {
		if _, ok := s.Tags[k]; !ok {
			n++
		}
	}
	if n > maxTags {
		return nil, tooManyTags()
	}
	return nil, toNilError(h.b.SetQueueTags(name, in.Tags, nil))
}

type untagQueueInput struct {
	QueueURL string   `json:"QueueUrl"`
	TagKeys  []string `json:"TagKeys"`
}

func (in *untagQueueInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	in.TagKeys = f.list("TagKey")
	return nil
}

func untagQueue(h *Handler, c *call, in *untagQueueInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if len(in.TagKeys) == 0 {
		return nil, missing("TagKeys")
	}
	return nil, toNilError(h.b.SetQueueTags(name, nil, in.TagKeys))
}

type listQueueTagsOutput struct {
	Tags tagMap `json:"Tags,omitempty" xml:"Tag"`
}

func listQueueTags(h *Handler, c *call, in *queueInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	return listQueueTagsOutput{tagMap(s.Tags)}, nil
}

// toNilError maps a broker error, keeping nil a nil interface.
func toNilError(err error) error {
	if err == nil {
		return nil
	}
	return toAPIError(err)
}
