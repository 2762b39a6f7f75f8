package txn

import (
	"testing"
	"time"
)

// FuzzDecodeRecord: any bytes give a record or an error, never a panic,
// and a record that decodes (format version 1 or 2) re-encodes to the
// same bytes.
func FuzzDecodeRecord(f *testing.F) {
	for _, ended := range []Producer{noProducer, {ID: 7, Epoch: 2}, {ID: 6, Epoch: 32767}} { // version 1, 2, 2 after an overflow
		f.Add(encodeRecord(&Txn{ID: "a", ProducerID: 7, Epoch: 3, LastEpoch: -1, Ended: ended, State: Ongoing, Timeout: time.Minute,
			Partitions: []Partition{{"t", 1}}, Groups: []string{"g"}, Offsets: []Offset{{Group: "g", Topic: "t", Offset: 9, Metadata: "m"}},
			Started: time.UnixMilli(5), Updated: time.UnixMilli(6)}))
	}
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		body, n, err := splitRecord(data)
		if err != nil {
			return
		}
		tx, err := decodeBody(body)
		if err != nil {
			return
		}
		if again := encodeRecord(tx); string(again) != string(data[:n]) {
			t.Fatalf("re-encoded %x, read %x", again, data[:n])
		}
	})
}
