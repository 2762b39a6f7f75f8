package broker

// peekQueue is PeekQueue for a replicated queue: read from the leader's replica, whose
// applied state is the freshest (a follower answers NOT_LEADER naming it, which the
// front-ends forward), with each message's place as the leader's cursor has it now.
// Nothing is proposed: a peek changes nothing on any replica.
func (c *clusterRT) peekQueue(name string, opts PeekOptions) (PeekResult, error) {
	h, _, err := c.leaderQueue(name)
	if err != nil {
		return PeekResult{}, err
	}
	ps, next := h.sm.Peek(c.b.now(), opts.From, opts.Max)
	res := PeekResult{Next: next, End: max(next, h.sm.Stats().Next)}
	for _, p := range ps {
		m, err := messageOf(h.group, p.Message)
		if err != nil {
			return PeekResult{}, err
		}
		res.Messages = append(res.Messages, PeekedMessage{Offset: p.Offset, Message: &m, State: p.State.String(),
			ReceiveCount: p.ReceiveCount, VisibleAt: p.VisibleAt})
	}
	return res, nil
}
