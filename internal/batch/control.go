package batch

import (
	"encoding/binary"
	"fmt"
)

// A control batch (attributes bit 5) holds one control record: a
// transaction marker. Its key is version int16 (0) and type int16 (0
// abort, 1 commit); its value is version int16 (0) and the coordinator
// epoch int32. Kafka's clients skip control batches and read the key to
// learn whether the producer's transaction committed or aborted.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// BuildMarker encodes a commit or abort marker of a transactional
// producer: one control record, sequence -1, transactional and control.
func BuildMarker(pid int64, epoch int16, commit bool, coordinatorEpoch int32, timestamp int64) ([]byte, error) {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16([]byte{0, 0}, uint16(typ))
	value := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordinatorEpoch))
	return Build([]Record{{Timestamp: timestamp, Key: key, Value: value}}, Options{
		Producer:      &Producer{ID: pid, Epoch: epoch, BaseSequence: -1},
		Transactional: true, Control: true,
	})
}

// ParseMarker reads the control record of a control batch b: whether it
// commits. A control record of an unknown version or type is an error.
func ParseMarker(b []byte) (commit bool, err error) {
	for r, err := range Records(b) {
		if err != nil {
			return false, err
		}
		return ParseControlKey(r.Key)
	}
	return false, corrupt("control batch without a record")
}

// ParseControlKey reads a control record's key.
func ParseControlKey(key []byte) (commit bool, err error) {
	if len(key) < 4 {
		return false, corrupt("control key of %d bytes, want 4", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != 0 {
		return false, corrupt("control key version %d", v)
	}
	switch t := int16(binary.BigEndian.Uint16(key[2:])); t {
	case ControlAbort:
		return false, nil
	case ControlCommit:
		return true, nil
	default:
		return false, &Error{Reason: fmt.Sprintf("control record type %d is not a transaction marker", t), Err: ErrCorrupt}
	}
}

// ParseMarkerEpoch is ParseMarker that also returns the marker's coordinator epoch (its
// value's int32; a cluster's coordinator puts the transaction's sequence there). A value
// too short for it is an error.
func ParseMarkerEpoch(b []byte) (commit bool, coordinatorEpoch int32, err error) {
	for r, err := range Records(b) {
		if err != nil {
			return false, 0, err
		}
		if commit, err = ParseControlKey(r.Key); err != nil {
			return false, 0, err
		}
		if len(r.Value) < 6 {
			return false, 0, corrupt("control value of %d bytes, want 6", len(r.Value))
		}
		return commit, int32(binary.BigEndian.Uint32(r.Value[2:6])), nil
	}
	return false, 0, corrupt("control batch without a record")
}
