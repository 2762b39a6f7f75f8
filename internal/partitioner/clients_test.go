package partitioner

import (
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franzPartition asks franz-go's default key partitioner, the one kgo uses
// when a producer sets no partitioner, where key goes.
func franzPartition(key []byte, n int32) int32 {
	if key == nil {
		key = []byte{} // kgo treats a nil key as "no key" and spreads it.
	}
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	return int32(p.Partition(&kgo.Record{Key: key}, int(n)))
}

// saramaPartition asks Sarama's murmur2 partitioner, which documents itself
// as a replica of the Java client's DefaultPartitioner.
func saramaPartition(t testing.TB, key []byte, n int32) int32 {
	t.Helper()
	if key == nil {
		key = []byte{}
	}
	msg := &sarama.ProducerMessage{Topic: "t", Key: sarama.ByteEncoder(key)}
	got, err := sarama.NewMurmur2Partitioner("t").Partition(msg, n)
	if err != nil {
		t.Fatalf("sarama partition: %v", err)
	}
	return got
}
