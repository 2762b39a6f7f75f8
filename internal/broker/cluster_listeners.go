package broker

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// The other nodes' TLS listeners (meta/listeners.go): not in the catalog, so each node
// asks each live peer, and asks again every listenersEvery, and at once when a peer it
// saw down is back (it may have restarted with other flags). A Kafka client that
// bootstrapped over TLS is told these addresses (ClusterNode.KafkaTLSAddr), not the
// plaintext ones.

// listenersEvery is how often a live peer is asked again (a restart quick enough that
// the peer never looked down is caught by it; one small request per peer, cheap);
// askListenersTimeout bounds one question.
const (
	listenersEvery      = 5 * time.Second
	askListenersTimeout = 300 * time.Millisecond
)

type peerListeners struct {
	mu    sync.Mutex
	by    map[multiraft.NodeID]meta.Listeners
	asked map[multiraft.NodeID]time.Time // when each peer last answered; forgotten when seen down
}

func (p *peerListeners) of(n multiraft.NodeID) meta.Listeners {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.by[n]
}

// due reports whether peer n is to be asked at now, forgetting when a down one answered.
func (p *peerListeners) due(n multiraft.NodeID, alive bool, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !alive {
		delete(p.asked, n) // back up, it is asked at once
		return false
	}
	at, ok := p.asked[n]
	return !ok || now.Sub(at) >= listenersEvery
}

func (p *peerListeners) answered(n multiraft.NodeID, l meta.Listeners, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by, p.asked = map[multiraft.NodeID]meta.Listeners{}, map[multiraft.NodeID]time.Time{}
	}
	p.by[n], p.asked[n] = l, now
}

// refreshListeners asks the live peers due for it, concurrently, and keeps their answers.
func (c *clusterRT) refreshListeners(now time.Time) {
	var wg sync.WaitGroup
	for _, nd := range c.meta.State().Nodes {
		n := nd.ID
		if n == c.node || !c.listeners.due(n, c.host.PeerAlive(n), now) {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.bgCtx, askListenersTimeout)
			defer cancel()
			l, err := c.cat.NodeListeners(ctx, n)
			if err != nil {
				c.log.Debug("cluster: no answer about a peer's TLS listeners", "peer", uint64(n), "err", err)
				return
			}
			c.listeners.answered(n, l, now)
		})
	}
	wg.Wait()
}
