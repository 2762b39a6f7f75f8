package txn

import (
	"testing"
	"time"
)

// FuzzDecodeRecord: any bytes give a record or an error, never a panic,
// and a record that decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(&Txn{ID: "a", ProducerID: 7, Epoch: 3, LastEpoch: -1, State: Ongoing, Timeout: time.Minute,
		Partitions: []Partition{{"t", 1}}, Groups: []string{"g"}, Offsets: []Offset{{Group: "g", Topic: "t", Offset: 9, Metadata: "m"}},
		Started: time.UnixMilli(5), Updated: time.UnixMilli(6)}))
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
