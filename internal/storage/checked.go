package storage

import (
	"context"
	"errors"
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

// AppendChecked is AppendEpoch for batches Check accepted: it assigns
// offsets, stamps the leader epoch and writes them, without validating
// them again.
func (l *Log) AppendChecked(ctx context.Context, epoch int32, c Checked) ([]int64, error) {
	if c.log != l && len(c.batches) > 0 {
		return nil, errForeignChecked
	}
	return l.append(ctx, c.batches, true, epoch)
}
