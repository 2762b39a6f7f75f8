package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/batch"
)

// Checked is a run of batches that passed one log's validation (Check):
// magic, CRC-32C, lengths, the records of uncompressed batches, the log's
// size limit, and records numbered 0…n-1. It is the only input of
// AppendChecked, and only Check makes one, so every batch that reaches a
// segment was validated, and validated once.
//
// The split exists for a caller that must know a batch is sound before it
// decides anything from its header: the broker checks a Kafka client's
// batch first, so that a corrupt batch is refused as corrupt (CORRUPT_MESSAGE)
// rather than judged by a damaged producer id or sequence, then runs its
// idempotent-producer checks, then appends what it checked. Append is
// Check and AppendChecked in one call.
type Checked struct {
	log     *Log
	batches [][]byte
}

// errForeignChecked: AppendChecked was given batches another log checked,
// whose limits may differ. A caller's bug, refused rather than trusted.
var errForeignChecked = errors.New("storage: batches were checked for another log")

// Check validates batches for appending to l; nothing is written. The
// batches are not copied: the caller must not modify them until appended.
func (l *Log) Check(batches ...[]byte) (Checked, error) {
	if err := l.validate(batches); err != nil {
		return Checked{}, err
	}
	return Checked{log: l, batches: batches}, nil
}

// Len is the number of batches.
func (c Checked) Len() int { return len(c.batches) }

// Batch returns batch i, as the caller passed it to Check.
func (c Checked) Batch(i int) []byte { return c.batches[i] }

// Slice returns batches [i, j), still checked.
func (c Checked) Slice(i, j int) Checked {
	return Checked{log: c.log, batches: c.batches[i:j]}
}

// AppendBuilt is Append for batches the caller has just encoded in memory with
// batch.Build or batch.AppendBuild (raftstore's entries): their framing, size and
// record numbering are checked as Append checks them, but not their CRC-32C and
// records, which Build computed from these very bytes a moment before. Verifying
// them again would only re-read memory, at the price of a pass over every byte
// (3 % of a cluster replica's CPU under W1). Reads verify the CRC as always.
func (l *Log) AppendBuilt(ctx context.Context, batches ...[]byte) ([]int64, error) {
	for i, b := range batches {
		h, err := batch.ParseHeader(b)
		switch {
		case err != nil:
		case h.Magic != batch.Magic:
			err = &batch.Error{Reason: fmt.Sprintf("magic %d", h.Magic), Err: batch.ErrBadMagic}
		case l.opts.MaxBatchBytes > 0 && len(b) > l.opts.MaxBatchBytes:
			err = &batch.Error{Reason: fmt.Sprintf("%d bytes, limit %d", len(b), l.opts.MaxBatchBytes), Err: batch.ErrTooLarge}
		case h.Size() != int64(len(b)) || h.RecordCount < 1 || h.LastOffsetDelta != h.RecordCount-1:
			err = &batch.Error{Reason: fmt.Sprintf("%d bytes framed as %d, %d records with lastOffsetDelta %d", len(b), h.Size(), h.RecordCount, h.LastOffsetDelta), Err: batch.ErrCorrupt}
		}
		if err != nil {
			return nil, fmt.Errorf("storage: batch %d of %d: %w", i, len(batches), err)
		}
	}
	return l.append(ctx, batches, false, 0)
}

// AppendChecked is AppendEpoch for batches Check accepted: it assigns
// offsets, stamps the leader epoch and writes them, without validating
// them again.
func (l *Log) AppendChecked(ctx context.Context, epoch int32, c Checked) ([]int64, error) {
	if c.log != l && len(c.batches) > 0 {
		return nil, errForeignChecked
	}
	return l.append(ctx, c.batches, true, epoch)
}
