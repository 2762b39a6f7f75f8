package broker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
)

// deadLetterCopies reads a subscription's dead letters from the topic's
// partitions (parts, as the receive that decided them saw them).
func (sub *subRT) deadLetterCopies(parts []*partitionRT, source string) func([]cursorDead) ([]deadLetterCopy, error) {
	return func(dead []cursorDead) ([]deadLetterCopy, error) {
		out := make([]deadLetterCopy, len(dead))
		for i, d := range dead {
			m, err := sub.deadLetterMessage(parts[d.cursor], source, d)
			if err != nil {
				return nil, err
			}
			if m != nil { // nil: lost
				out[i] = deadLetterCopy{m, fmt.Sprintf("subscription %s/%d@%d", source, d.cursor, d.d.Offset)}
			}
		}
		return out, nil
	}
}

// deadLetterMessage makes the dead-letter queue's message of a record.
func (sub *subRT) deadLetterMessage(p *partitionRT, source string, d cursorDead) (*Message, error) {
	recs, err := readRecords(p, []int64{d.d.Offset})
	if err != nil {
		return nil, err
	}
	r, ok := recs[d.d.Offset]
	if !ok {
		return nil, nil // lost to a damaged batch
	}
	m := &Message{
		// A stable id: a copy repeated after a crash is deduplicated by a
		// FIFO dead-letter queue.
		ID:   stableID(source, d.cursor, d.d.Offset),
		Body: r.Value,
		System: map[string]string{
			"sluice.topic": sub.t.name, "sluice.partition": strconv.Itoa(d.cursor),
			"sluice.offset": strconv.FormatInt(d.d.Offset, 10), "sluice.key": string(r.Key),
		},
		SentAt:     d.d.SentAt,
		DeadLetter: deadLetterInfo(source, d.d),
	}
	if len(r.Headers) > 0 {
		m.Attributes = make(map[string]Attribute, len(r.Headers))
		for _, h := range r.Headers {
			m.Attributes[h.Key] = Attribute{DataType: "Binary", Value: h.Value}
		}
	}
	if m.Body == nil {
		m.Body = []byte{}
	}
	return m, nil
}

// stableID names a dead-lettered record the same way every time.
func stableID(source string, p int, off int64) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%d", source, p, off)))
	return hex.EncodeToString(sum[:16])
}
