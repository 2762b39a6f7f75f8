package batch

// The delete horizon (attributes bit 6, as Kafka's KIP-534): log
// compaction sets it on a batch it will remove later, with the batch's
// base timestamp holding the time (ms) from which it may go. Sluice's
// cleaner sets it on a transaction marker once no record of its
// transaction is left (the marker is kept delete.retention.ms more, for
// consumers in the middle of the transaction), and removes the marker on
// a pass after the horizon. Clients ignore the bit on control batches.
const attrDeleteHorizon = 0x40

// DeleteHorizon returns the delete horizon set on the batch (ms), if any.
func (h Header) DeleteHorizon() (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

// WithDeleteHorizon returns the batch b rebuilt (uncompressed) with its
// delete horizon set to ms; its records keep their offsets and timestamps.
func WithDeleteHorizon(b []byte, ms int64) ([]byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for r, err := range Records(b) {
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	h.Attributes |= attrDeleteHorizon
	h.BaseTimestamp = ms
	return Rebuild(h, recs), nil
}
