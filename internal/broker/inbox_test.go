package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
)

// loyaltyDB is the consumer's database from the seed's step 6: an inbox of
// applied event ids next to the balances, updated in one transaction.
type loyaltyDB struct {
	points map[string]int
	inbox  map[string]bool
	trace  []string
}

func (db *loyaltyDB) apply(eventID, order string, points int) bool {
	if db.inbox[eventID] {
		return false
	}
	db.inbox[eventID] = true
	db.points[order] += points
	return true
}

var errConsumerCrash = errors.New("consumer crashed before committing")

// consumeInbox is the seed's consume loop against the real broker: join
// the group, resume from its committed offset, poll three records at a
// time, apply each, and commit only after the whole poll took effect.
func consumeInbox(e *env, db *loyaltyDB, crashAfter int64) error {
	ctx := context.Background()
	a, err := e.b.JoinConsumer(ctx, ConsumerJoin{Group: "loyalty", ClientID: "loyalty", Topics: []string{"orders"}, SessionTimeout: testSession})
	if err != nil {
		return err
	}
	pos := int64(0)
	if c, ok := e.b.FetchOffset("loyalty", "orders", 0); ok {
		pos = c.Offset
	}
	db.trace = append(db.trace, fmt.Sprintf("poll from offset %d", pos))
	for range 100 {
		res, err := e.b.Fetch(ctx, "orders", 0, pos, FetchOptions{})
		if err != nil {
			return err
		}
		recs := decodeBatches(e.t, res.Batches)
		var poll []string
		for _, r := range recs {
			if r.Offset >= pos && len(poll) < 3 {
				poll = append(poll, string(r.Value))
			}
		}
		if len(poll) == 0 {
			return nil
		}
		for _, v := range poll {
			var id, order string
			var pts int
			fmt.Sscanf(strings.ReplaceAll(v, ",", " "), "%s %s %d", &id, &order, &pts)
			result := "duplicate, skipped"
			if db.apply(id, order, pts) {
				result = "applied"
			}
			db.trace = append(db.trace, fmt.Sprintf("offset %d %s %s", pos, id, result))
			if pos == crashAfter {
				return errConsumerCrash
			}
			pos++
		}
		errs, err := e.b.CommitOffsets(ctx, group.CommitRequest{Group: "loyalty", MemberID: a.MemberID, Generation: a.Generation,
			Offsets: []group.OffsetCommit{{Topic: "orders", Partition: 0, Offset: pos}}})
		if err = errors.Join(err, errors.Join(errs...)); err != nil {
			return err
		}
		db.trace = append(db.trace, fmt.Sprintf("commit offset %d", pos))
	}
	return errors.New("consume did not finish")
}

func TestInboxSeedStep6(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("orders", 1)
	for _, v := range []string{"evt-a,101,10", "evt-b,102,5", "evt-c,103,20",
		"evt-b,102,5", // the outbox relay crashed and published evt-b again
		"evt-d,104,8", "evt-e,105,12"} {
		e.produce("orders", kv("", v))
	}
	db := &loyaltyDB{points: map[string]int{}, inbox: map[string]bool{}}
	if err := consumeInbox(e, db, 4); !errors.Is(err, errConsumerCrash) {
		t.Fatalf("first run: %v", err)
	}
	// The consumer died with the broker: a power cut. The group and its
	// member are gone; the committed offset is not.
	e.crash()
	if err := consumeInbox(e, db, -1); err != nil {
		t.Fatalf("second run: %v", err)
	}
	var orders []string
	for o := range db.points {
		orders = append(orders, o)
	}
	sort.Strings(orders)
	var totals []string
	for _, o := range orders {
		totals = append(totals, fmt.Sprintf("%s=%d", o, db.points[o]))
	}
	got := fmt.Sprintf("points: %s, events applied %d", strings.Join(totals, " "), len(db.inbox))
	if want := "points: 101=10 102=5 103=20 104=8 105=12, events applied 5"; got != want {
		t.Fatalf("%s\nwant %s\ntrace:\n%s", got, want, strings.Join(db.trace, "\n"))
	}
	wantTrace := []string{
		"poll from offset 0", "offset 0 evt-a applied", "offset 1 evt-b applied", "offset 2 evt-c applied",
		"commit offset 3", "offset 3 evt-b duplicate, skipped", "offset 4 evt-d applied",
		"poll from offset 3", "offset 3 evt-b duplicate, skipped", "offset 4 evt-d duplicate, skipped",
		"offset 5 evt-e applied", "commit offset 6",
	}
	if strings.Join(db.trace, "\n") != strings.Join(wantTrace, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(db.trace, "\n"), strings.Join(wantTrace, "\n"))
	}
}

func TestLagInMessagesAndSeconds(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.b.CreateTopic(TopicSettings{Name: "l", Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		e.produce("l", kv("", fmt.Sprint(i)))
		e.clock.Advance(time.Minute)
	}
	if _, err := e.b.ResetGroupOffsets("slow", "l", nil, ResetSpec{To: ResetToOffset, Offset: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.ResetGroupOffsets("fast", "l", nil, ResetSpec{To: ResetLatest}); err != nil {
		t.Fatal(err)
	}
	lag, err := e.b.GroupLag("slow")
	if err != nil || len(lag.Partitions) != 1 {
		t.Fatalf("lag: %+v %v", lag, err)
	}
	// Record 2 was produced at minute 2; it is now minute 10.
	if l := lag.Partitions[0]; l.Messages != 8 || l.Age != 8*time.Minute {
		t.Fatalf("slow lag: %+v", l)
	}
	if fast, _ := e.b.GroupLag("fast"); fast.Messages != 0 || fast.MaxAge != 0 {
		t.Fatalf("fast lag: %+v", fast)
	}
	if all := e.b.AllGroupLag(); len(all) != 2 {
		t.Fatalf("all lag: %+v", all)
	}
	h, err := e.b.RetentionHeadroom("l")
	if err != nil || h.SlowestGroup != "slow" || h.Headroom != time.Hour-8*time.Minute {
		t.Fatalf("headroom: %+v %v", h, err)
	}
}
