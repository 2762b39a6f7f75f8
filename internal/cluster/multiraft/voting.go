package multiraft

import "go.etcd.io/raft/v3/raftpb"

// commitPastLog drops a heartbeat that commits past the replica's log, which raft would
// step into a panic ("tocommit is out of range"): the leader remembers this node matching
// entries it no longer holds, because its disk lost them (a wipe, or a disk that lost
// synced writes). A leader's heartbeat commits at most what the follower acknowledged, and
// a follower acknowledges only what it synced, so a replica whose disk kept its promises
// never sees one. raft never lowers a follower's match (Progress.MaybeDecrTo ignores a
// rejection below it), so such a replica stays behind, and blank, until a new leader
// probes it from scratch (or it is removed and added back); it never panics the node and
// never votes meanwhile. Called with h.mu held.
func (h *Host) commitPastLog(g *group, m raftpb.Message) bool {
	if m.Type != raftpb.MsgHeartbeat || m.Commit == 0 {
		return false
	}
	last, err := g.store.LastIndex()
	if err != nil || m.Commit <= last {
		return false
	}
	h.stats.LostLogBeats++
	return true
}

// A replica that lost its disk must not vote under its old identity.
//
// raft grants a vote to any candidate whose log is at least as up to date as the voter's,
// and it does not check that the candidate or the voter is a member. A replica whose
// HardState and log are gone (a node restarted on an empty disk, under the node ID it had)
// has forgotten the votes it cast, and its empty log is behind every candidate's. It would
// vote again in a term it already voted in (two leaders in one term), and vote for a
// candidate that lacks entries this replica had acknowledged, completing a majority that
// then overwrites committed entries: an acknowledged write lost
// (testdata/script/wiped_disk.txt shows both).
//
// What the host enforces: a group opened on empty storage with no voters (CreateGroup with
// nil voters, which is how a node restarts its groups and how a node being added starts
// one) is blank: it drops every MsgVote and MsgPreVote until a leader's log (always a
// snapshot first: every group's log starts at a bootstrap snapshot) has been written to its
// storage in a Ready round. A blank replica cannot campaign either (raft does not campaign
// with a configuration that does not name it). A replica with no state is worth no vote:
// nothing it could vote for depends on it, except a voter added directly as a voter (not
// first as a learner) and never sent the log, which then stays unable to help elect until
// a leader reaches it. Add voters as learners first.
//
// What it cannot enforce alone (docs/cluster.md, "Engine on storage"): once caught up,
// the replica votes again, and it may have voted, before it lost its disk, in a term above
// the one its new leader is in. Only a new replica identity closes that (CockroachDB and
// TiKV never reuse a replica ID; etcd removes the member and adds it back under a new ID):
// a node that lost its disk must be removed from its groups and added back. The engine's
// node identity (internal/cluster/engine) refuses to start a node that was a member on an
// empty disk, so an operator cannot do it by mistake. And CreateGroup with voters on a
// wiped disk bootstraps a new replica as if the group were new: voters must only be given
// when the group is created, never when a node restarts.
func refusedWhileBlank(t raftpb.MessageType) bool {
	return t == raftpb.MsgVote || t == raftpb.MsgPreVote
}
