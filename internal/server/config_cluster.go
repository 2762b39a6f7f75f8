package server

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ClusterPeer is one node of --cluster-peers.
type ClusterPeer struct {
	ID   uint64
	Addr string // host:port of its Raft transport
}

// ParseClusterPeers parses "1=host:port,2=host:port": ids positive and distinct, every
// address host:port. The result is sorted by id.
func ParseClusterPeers(s string) ([]ClusterPeer, error) {
	var out []ClusterPeer
	seen := map[uint64]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		idText, addr, ok := strings.Cut(part, "=")
		id, err := strconv.ParseUint(strings.TrimSpace(idText), 10, 64)
		if !ok || err != nil || id == 0 {
			return nil, fmt.Errorf("want id=host:port with a positive id, got %q", part)
		}
		addr = strings.TrimSpace(addr)
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("node %d: want host:port, got %q", id, addr)
		}
		if seen[id] {
			return nil, fmt.Errorf("node %d is listed twice", id)
		}
		seen[id] = true
		out = append(out, ClusterPeer{ID: id, Addr: addr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Clustered reports whether the configuration makes this node part of a cluster.
func (c Config) Clustered() bool { return c.NodeID != 0 }

// validClusterID: what a handshake carries (at most 64 bytes) and a Kafka client shows,
// in the characters of Kafka's own ids (base64url) and dots.
var validClusterID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (c Config) validateCluster() error {
	if c.ClusterID != "" && !validClusterID.MatchString(c.ClusterID) {
		return fmt.Errorf("--cluster-id: want 1 to 64 of A-Z a-z 0-9 . _ -, got %q", c.ClusterID)
	}
	if !c.Clustered() {
		if c.ClusterAddr != "" || c.ClusterPeers != "" || c.ClusterJoin {
			return errors.New("--cluster-addr, --cluster-peers and --cluster-join: need --node-id")
		}
		return nil
	}
	if c.NodeID > 1<<31-1 {
		return fmt.Errorf("--node-id: at most %d (Kafka's broker ids are 32-bit), got %d", 1<<31-1, c.NodeID)
	}
	if _, _, err := net.SplitHostPort(c.ClusterAddr); err != nil {
		return fmt.Errorf("--cluster-addr: want host:port, got %q", c.ClusterAddr)
	}
	peers, err := ParseClusterPeers(c.ClusterPeers)
	if err != nil {
		return fmt.Errorf("--cluster-peers: %w", err)
	}
	self := false
	for _, p := range peers {
		self = self || p.ID == c.NodeID
	}
	if !self {
		return fmt.Errorf("--cluster-peers: must list this node (%d) too", c.NodeID)
	}
	if c.ClusterTick < time.Millisecond || c.ClusterTick > 10*time.Second {
		return fmt.Errorf("--cluster-tick: want 1ms to 10s, got %s", c.ClusterTick)
	}
	if c.ClusterLeaderBalance < 0 {
		return fmt.Errorf("--cluster-leader-balance: want 0 (never) or more, got %s", c.ClusterLeaderBalance)
	}
	set := 0
	for _, f := range []string{c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return errors.New("--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca: give all three (mutual TLS between nodes) or none")
	}
	// Without TLS anyone who reaches the Raft transport could take part in replication
	// (vote, append, read every message): only loopback, whatever else the flags say
	// (--insecure-allow-anonymous is about clients).
	if set == 0 && !IsLoopback(c.ClusterAddr) {
		return fmt.Errorf("--cluster-addr: %s is not a loopback address, and the Raft transport between nodes has no TLS, "+
			"so anyone who can reach it could take part in replication; give --cluster-tls-cert, --cluster-tls-key and "+
			"--cluster-tls-ca (mutual TLS: docs/cluster.md, \"Transport security\"), or bind loopback", c.ClusterAddr)
	}
	return nil
}
