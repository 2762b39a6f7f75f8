package replqueue

// Feature levels (docs/cluster.md, "Upgrades: one node at a time, and the feature level").
// A replica stops its queue's group on an op it cannot decode, so a new op must not enter
// the log while a replica of an older build runs. This package knows its ops; the broker
// knows which feature level admits each (its queueOpLevels) and what level the cluster is
// at, and checks every proposal through the Queue's admit function.

// Ops lists every op Decode knows (TestOpsListed fails when one is missing): the broker
// gives each the feature level that admits it.
func Ops() []Op {
	return []Op{OpSend, OpReceive, OpAck, OpNack, OpExtend, OpPut, OpReceiveLimited, OpDeadDone, OpPurge, OpConfigure, OpNackReason}
}

// SetAdmit sets the check every command of q passes before it is proposed: its error
// refuses the command, which never reaches the log. nil (the default) admits every op.
func (q *Queue) SetAdmit(admit func(Op) error) { q.admit.Store(&admit) }

// admitted runs the admit function on op.
func (q *Queue) admitted(op Op) error {
	if f := q.admit.Load(); f != nil && *f != nil {
		return (*f)(op)
	}
	return nil
}
