package replpart

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/wire"
)

// A forget entry expires idle idempotent producers (Kafka's producer.id.expiration.ms) on
// every replica at the same point of the group's log. Each replica decides at apply, from
// its producers' state, whether a batch is a duplicate or a gap, so that state must be
// the same everywhere: a replica may not forget by its own clock. The leader lists the
// producers idle by its clock, each with its last batch's offset, and every replica
// forgets those whose last batch is still that one (a producer that wrote since stays).

// forgetVersion is the first byte of a forget entry.
const forgetVersion = 4

// ForgetKind is the kind of a forget entry (levels.go).
var ForgetKind = EntryKind{Version: forgetVersion}

// IdleProducer is a producer to forget: its id and the base offset of its last batch
// (-1: none).
type IdleProducer struct {
	ID       int64
	LastBase int64
}

// MaxForgetProducers bounds one forget entry's producers (about 20 bytes each): the
// caller proposes the rest in later entries.
const MaxForgetProducers = 10_000

// ProducerForgetter is a Log whose idempotent producers can be forgotten: forget entries
// need it.
type ProducerForgetter interface {
	// ForgetProducers forgets the listed producers whose last batch is still the one
	// listed. A returned error stops the group here.
	ForgetProducers(ps []IdleProducer) error
}

// encodeForget appends a forget entry of ps:
//
//	version(1)=4 count(uvarint) {id(varint) last base(varint)}...
func encodeForget(b []byte, ps []IdleProducer) []byte {
	b = append(b, forgetVersion)
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendVarint(b, p.ID)
		b = binary.AppendVarint(b, p.LastBase)
	}
	return b
}

// decodeForget parses a forget entry (b[0] == forgetVersion). Any malformed input (no
// producer, more than MaxForgetProducers, a count past the bytes, a negative id, a last
// base below -1, trailing bytes) is ErrBadEntry.
func decodeForget(b []byte) ([]IdleProducer, error) {
	d := wire.Decoder{B: b[1:], Bad: ErrBadEntry}
	n := d.Uvarint()
	if d.Err == nil && (n == 0 || n > MaxForgetProducers || n > uint64(len(d.B))/2) {
		d.Fail("%d producers in %d bytes", n, len(d.B))
	}
	var ps []IdleProducer
	if d.Err == nil {
		ps = make([]IdleProducer, 0, n)
	}
	for i := uint64(0); i < n && d.Err == nil; i++ {
		p := IdleProducer{ID: d.Varint(), LastBase: d.Varint()}
		if d.Err == nil && (p.ID < 0 || p.LastBase < -1) {
			d.Fail("producer %d with last batch at %d", p.ID, p.LastBase)
		}
		ps = append(ps, p)
	}
	d.Done()
	return ps, d.Err
}

// Forget proposes a forget entry of ps (at most MaxForgetProducers) and returns without
// waiting: an entry lost with a leader is proposed again by the leader's next pass, as the
// producers are still idle. Errors: *NotLeaderError, a refusal of the feature level
// (SetAdmit), ErrBadAppend for an empty or too long list.
func (p *Partition) Forget(ps []IdleProducer) error {
	if len(ps) == 0 || len(ps) > MaxForgetProducers {
		return fmt.Errorf("%w: forget %d producers", ErrBadAppend, len(ps))
	}
	if err := p.admitted(ForgetKind); err != nil {
		return err
	}
	if _, err := p.host.ProposeAsync(p.group, encodeForget(nil, ps)); err != nil {
		return mapErr(err)
	}
	return nil
}

// applyForget hands a forget entry to the log. A log that cannot forget, or fails to,
// stops the group: a replica that skipped the entry would decide later batches otherwise.
func (m *Machine) applyForget(e multiraft.Entry) error {
	ps, err := decodeForget(e.Data)
	if err != nil {
		return fmt.Errorf("replpart: entry %d: %w", e.Index, err)
	}
	f, ok := m.log.(ProducerForgetter)
	if !ok {
		return fmt.Errorf("replpart: entry %d: the local log cannot forget producers", e.Index)
	}
	if err := f.ForgetProducers(ps); err != nil {
		return fmt.Errorf("replpart: entry %d: forget producers: %w", e.Index, err)
	}
	return nil
}
