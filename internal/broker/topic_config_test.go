package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// TestUpdateTopic: configs change durably (across a crash), a refused or
// dry-run update changes nothing, and max message bytes applies to Kafka
// batches at once, both lower and higher than at creation.
func TestUpdateTopic(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("cfg", 2)
	big, err := batch.Build([]batch.Record{{Value: make([]byte, 4000)}}, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.ProduceBatches(context.Background(), "cfg", 0, [][]byte{big}); err != nil {
		t.Fatalf("4 KB batch under the default limit: %v", err)
	}
	set := func(dry bool, fn func(*TopicSettings) error) (TopicSettings, error) {
		return e.b.UpdateTopic("cfg", dry, fn)
	}
	if _, err := set(false, func(s *TopicSettings) error { s.MaxMessageBytes = 2048; s.Retention = time.Hour; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.ProduceBatches(context.Background(), "cfg", 0, [][]byte{big}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("4 KB batch over a 2 KB limit: %v", err)
	}
	for _, bad := range []func(*TopicSettings) error{
		func(s *TopicSettings) error { s.CleanupPolicy = "compaction"; return nil },
		func(s *TopicSettings) error { s.MinCleanableDirtyRatio = 2; return nil },
		func(s *TopicSettings) error {
			s.MinCompactionLag, s.MaxCompactionLag = time.Hour, time.Minute
			return nil
		},
		func(s *TopicSettings) error { s.MaxMessageBytes = 10; return nil },
		func(s *TopicSettings) error { s.Retention = 0; return errors.New("refused by the caller") },
	} {
		if _, err := set(false, bad); err == nil {
			t.Fatal("a bad update was accepted")
		}
	}
	if got, err := set(true, func(s *TopicSettings) error { s.Retention = 2 * time.Hour; return nil }); err != nil || got.Retention != 2*time.Hour {
		t.Fatalf("dry run: %+v %v", got, err)
	}
	// Identity cannot change through UpdateTopic.
	if got, _ := set(false, func(s *TopicSettings) error { s.Name, s.Partitions = "other", 9; return nil }); got.Name != "cfg" || got.Partitions != 2 {
		t.Fatalf("identity changed: %+v", got)
	}
	e.crash()
	info, err := e.b.DescribeTopic("cfg")
	if err != nil {
		t.Fatal(err)
	}
	if s := info.Settings; s.MaxMessageBytes != 2048 || s.Retention != time.Hour || s.CleanupPolicy != CleanupDelete {
		t.Fatalf("after a crash: %+v", s)
	}
	if _, err := set(false, func(s *TopicSettings) error { s.MaxMessageBytes = 8 << 20; return nil }); err != nil {
		t.Fatal(err)
	}
	huge, err := batch.Build([]batch.Record{{Value: make([]byte, 3<<20)}}, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.ProduceBatches(context.Background(), "cfg", 1, [][]byte{huge}); err != nil {
		t.Fatalf("3 MiB batch under a raised 8 MiB limit: %v", err)
	}
}
