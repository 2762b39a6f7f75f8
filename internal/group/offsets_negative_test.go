package group

import (
	"errors"
	"testing"
	"time"
)

// Kafka stores the sentinels -1 (latest) and -2 (earliest) that reset
// tools commit; anything lower is refused and stores nothing.
func TestCommitNegativeOffsets(t *testing.T) {
	for _, tc := range []struct {
		offset int64
		ok     bool
	}{{-1, true}, {-2, true}, {-3, false}, {-1 << 63, false}, {0, true}} {
		c := New(Config{})
		now := time.UnixMilli(1_767_225_600_000)
		errs, out, err := c.Commit(now, CommitRequest{Group: "g", Generation: -1,
			Offsets: []OffsetCommit{{Topic: "t", Partition: 0, Offset: tc.offset, LeaderEpoch: -1}}})
		if err != nil {
			t.Fatalf("offset %d: %v", tc.offset, err)
		}
		got, found := c.Fetch("g", "t", 0)
		if !tc.ok {
			if !errors.Is(errs[0], ErrInvalidOffset) || found || len(out.Events) != 0 {
				t.Fatalf("offset %d: errs=%v found=%v events=%d, want refused and nothing stored", tc.offset, errs, found, len(out.Events))
			}
			continue
		}
		if errs[0] != nil || !found || got.Offset != tc.offset {
			t.Fatalf("offset %d: errs=%v found=%v got=%d", tc.offset, errs, found, got.Offset)
		}
		// The journaled event replays to the same offset.
		raw, err := out.Events[0].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		ev, err := UnmarshalEvent(raw)
		if err != nil || ev.Offsets[0].Offset != tc.offset {
			t.Fatalf("offset %d: replayed %+v, %v", tc.offset, ev, err)
		}
		if want := byte(eventVersion); tc.offset < 0 {
			if raw[0] != eventVersionSigned {
				t.Fatalf("offset %d: encoded as version %d", tc.offset, raw[0])
			}
		} else if raw[0] != want {
			t.Fatalf("offset %d: encoded as version %d, want %d (readable by older builds)", tc.offset, raw[0], want)
		}
	}
}

// A version 2 event must hold a negative offset: otherwise the same event
// would have two encodings.
func TestSignedVersionNeedsNegativeOffset(t *testing.T) {
	ev := Event{Type: EventOffsetsCommitted, Group: "g", Time: time.UnixMilli(0),
		Offsets: []CommittedOffset{{Topic: "t", Committed: Committed{Offset: 5, CommitTime: time.UnixMilli(0)}}}}
	raw, _ := ev.MarshalBinary()
	raw[0] = eventVersionSigned // offset 5 as uvarint is 10 as varint: still positive
	if _, err := UnmarshalEvent(raw); !errors.Is(err, ErrCorruptEvent) {
		t.Fatalf("version 2 without a negative offset: %v", err)
	}
}
