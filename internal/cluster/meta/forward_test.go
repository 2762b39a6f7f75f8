package meta

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestForwardReturnsTheLeadersRefusal: a follower forwards a command its own (stale) State
// let through; the leader refuses it. The forward returns that refusal, which the machine
// kept for this node's request, instead of waiting for its context (a `sluice cluster
// remove-node` through a follower hung 30 s on such a refusal).
func TestForwardReturnsTheLeadersRefusal(t *testing.T) {
	c := newCluster(t, 3)
	l := c.elect()
	var follower multiraft.NodeID
	for _, id := range c.ids {
		if id != l {
			follower = id
			break
		}
	}
	fcat := c.nodes[follower].cat
	// Deleting a topic nobody created: the follower's check would refuse it too, so the
	// command goes to forward directly, as one whose check passed on an older State.
	cmd := Command{Op: OpDeleteTopic, Name: "ghost"}
	err := c.call(func(ctx context.Context) error {
		return fcat.forward(ctx, cmd, func(*State) bool { return false })
	})
	if !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("forwarded refusal: %v, want ErrUnknownTopic", err)
	}
	// An accepted forward still returns once applied, and leaves no refusal behind.
	if err := c.call(func(ctx context.Context) error { return fcat.RegisterNode(ctx, Node{ID: follower, HTTPAddr: "h"}) }); err != nil {
		t.Fatal(err)
	}
}
