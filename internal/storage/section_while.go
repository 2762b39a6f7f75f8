package storage

import "github.com/sluice-mq/sluice/internal/batch"

// ReadSectionWhile is ReadSection that also ends the section before the
// first batch keep refuses: a reader that cannot take some batches (a
// Kafka client too old for zstd) gets the ones before it, and the next
// read starts at the refused one. keep sees each batch's header as
// batch.ParseHeader decodes it, so no caller reads header bytes itself.
//
// stopped reports that keep refused the batch the section ends before;
// with an empty section it means the batch at offset itself was refused
// (the reader can never get past it). Unlike ReadSection, every header up
// to the cut is read, since the offset index cannot say which batches keep
// would refuse. Batches are checked and damage quarantined as ReadSection
// does.
func (l *Log) ReadSectionWhile(offset int64, maxBytes int, keep func(batch.Header) bool) (sec Section, stopped bool, err error) {
	return l.readSection(offset, maxBytes, keep)
}
