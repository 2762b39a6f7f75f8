package sqs

func init() { register("PurgeQueue", handle(purgeQueue)) }

// purgeQueue deletes every message sent before the call, in flight ones
// included. SQS allows one purge per queue per 60 s (PurgeQueueInProgress);
// sluice purges at once every time, because local test suites purge between
// tests and a purge here finishes before the call returns.
func purgeQueue(h *Handler, c *call, in *queueInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if err := h.b.PurgeQueue(c.ctx, name); err != nil {
		return nil, toAPIError(err)
	}
	return nil, nil
}
