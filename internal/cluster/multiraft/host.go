package multiraft

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Config is a host's configuration. Zero values take the defaults in parentheses.
type Config struct {
	Node      NodeID    // this node; never 0
	Peers     []NodeID  // the other nodes, beaten to for liveness (liveness.go)
	Engine    Engine    // every group's storage
	Transport Transport // batches to other nodes

	ElectionTicks  int // raft's ElectionTick (10): a follower campaigns after 10..19 ticks without a leader
	HeartbeatTicks int // raft's HeartbeatTick (1)
	// QuiesceAfterTicks is how many ticks a leader's group stays idle before it quiesces (6).
	QuiesceAfterTicks int
	DisableQuiesce    bool
	// LivenessTicks is how often (in ticks) a node beats every peer it sent nothing else to
	// (4); NodeTimeoutTicks is how long a peer may stay silent before it counts as down
	// (ElectionTicks). Their difference is how long a live node's Ready loop may stall
	// after a beat (a slow fsync) before its peers count it down: 6 ticks by default. A
	// beat every 2 ticks allowed 8, and cost an idle 3-node cluster a third of its CPU
	// (docs/benchmarks.md, "Idle").
	LivenessTicks    int
	NodeTimeoutTicks int
	// SnapshotEntries: after this many applied entries a group snapshots its state machine
	// and compacts its log (10000).
	SnapshotEntries uint64
	// MaxSizePerMsg (1 MiB), MaxInflightMsgs (256) and MaxInflightBytes (32 MiB) are raft's
	// flow control per follower: at most that much unacknowledged log in flight to each, so a
	// slow follower costs the leader a bounded amount of memory (CockroachDB's cap after
	// 128 × 16 MB appends took 2 GB per range, cockroach #90314).
	MaxSizePerMsg    uint64
	MaxInflightMsgs  int
	MaxInflightBytes uint64
	Logger           raft.Logger // raft's logger (errors only, to the standard logger)
	// Log hears what the host itself has to say: a group that stopped on this node
	// (slog.Default()).
	Log *slog.Logger
	// OnDiskFull, if set, hears the first append of a stall the disk had no room for
	// (diskfull.go), from the Ready loop: it must not wait for the host.
	OnDiskFull func(error)
	// ObserveRound, if set, hears how long each Ready round that did work took (Run's):
	// a round longer than the node timeout's slack stalls every group of the node, and
	// its peers count it down. Called from the Ready loop: it must not block.
	ObserveRound func(time.Duration)
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.ElectionTicks, 10)
	def(&c.HeartbeatTicks, 1)
	def(&c.QuiesceAfterTicks, 6)
	def(&c.LivenessTicks, 4)
	def(&c.NodeTimeoutTicks, c.ElectionTicks)
	def(&c.MaxInflightMsgs, 256)
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = max(32<<20, c.MaxSizePerMsg)
	}
	if c.Logger == nil {
		c.Logger = quietLogger{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// StateMachine is a group's replicated state on this node. The host calls it from its Ready
// loop only, one call at a time per group, in log order.
type StateMachine interface {
	// Apply applies committed entries, in index order. An error stops the group on this
	// node: a state machine that cannot apply an entry cannot skip it either.
	Apply(entries []Entry) error
	// Snapshot returns the state as of the last applied entry.
	Snapshot() ([]byte, error)
	// Restore replaces the state by a snapshot's (nil: the empty state).
	Restore(data []byte) error
}

// Entry is one committed application entry: Data is what was proposed.
type Entry struct {
	Index, Term uint64
	Data        []byte
}

// Host runs the Raft groups of one node.
type Host struct {
	cfg Config

	readyMu sync.Mutex // serialises ProcessReady: a RawNode takes one Ready at a time
	stalled *stall     // under readyMu: a round the disk had no room for (diskfull.go)
	// onDiskFull is Config.OnDiskFull, or what SetOnDiskFull put in its place.
	onDiskFull atomic.Pointer[func(error)]

	mu         sync.Mutex // guards everything below, and every group's RawNode and fields
	closed     bool
	storageErr error // a round failed to persist: the host takes no more rounds or proposals
	diskFull   error // the append a stalled round waits to write (diskfull.go)
	// prepFull is the last snapshot preparation's no-room error (until one succeeds, and
	// reported for prepFullFor after it), and prepFullAt when it failed (diskfull.go).
	prepFull   error
	prepFullAt time.Time
	now        uint64 // ticks so far
	groups     map[GroupID]*group
	creating   map[GroupID]bool     // CreateGroup under way (its Restore runs unlocked)
	active     map[GroupID]*group   // not quiesced: ticked
	dirty      map[GroupID]struct{} // may have a Ready
	outbox     []Message            // host-made messages (quiesce heartbeats) for the next round
	peers      map[NodeID]*peer
	nextSeq    uint64
	beatAt     uint64 // the tick of the last liveness beat
	clk        clock  // Run's Sleeper (sleep.go)
	stats      Stats

	work chan struct{} // a ProcessReady may have something to do

	// Snapshot preparations (prepare.go) and encodings (encode.go) run on goroutines of
	// their own, until Close; preparing counts both.
	prepCtx    context.Context
	prepCancel context.CancelFunc
	prepWG     sync.WaitGroup
	preparing  int           // under mu
	encoded    []encodedSnap // under mu: encodings done, for the next round to store
	// storeBudget bounds a round's storing of them (snapshotStoreBudget; tests change it).
	storeBudget time.Duration

	// round is where the last ProcessReady's time went, and slow the warnings about
	// slow rounds (run.go). Ready loop only.
	round roundTrace
	slow  slowRounds
}

// Stats are a host's counters since it started, and (Groups, Awake, PeersDown) its
// state when Stats was called.
type Stats struct {
	Groups     int    // groups hosted
	Awake      int    // groups ticking: not quiesced (an idle cluster's should fall to ~0)
	PeersDown  int    // configured peers the liveness beat has not heard from lately
	GroupTicks uint64 // RawNode.Tick calls: what idle groups must not cost
	Rounds     uint64 // ProcessReady rounds that did work
	Syncs      uint64 // Engine.Sync calls
	// DiskFullStalls counts the rounds the disk had no room for (each stall once);
	// DiskFull is whether one stalls the Ready loop now (diskfull.go).
	DiskFullStalls uint64
	DiskFull       bool
	// AppendsDroppedWhileFull counts appends from leaders dropped during such stalls.
	AppendsDroppedWhileFull uint64
	Readys                  uint64 // group Readys handled (Readys/Syncs is the group commit)
	Batches                 uint64 // batches sent
	Messages                uint64 // raft messages sent
	Quiesces                uint64
	Wakes                   uint64
	SnapsSent               uint64 // snapshots handed to the transport (a follower too far behind the log)
	SnapsTaken              uint64 // snapshots received and restored
	// SnapsCreated and SnapBytesCreated count the snapshots of state machines taken here
	// (maybeSnapshot), and their bytes.
	SnapsCreated, SnapBytesCreated uint64
	// VotesRefused counts vote and pre-vote requests dropped because the replica was
	// blank (voting.go): a node restarted on an empty disk, or a replica not yet caught up.
	VotesRefused uint64
	// LostLogBeats counts heartbeats dropped because they commit past this replica's log
	// (voting.go): its leader counts on entries this node no longer holds.
	LostLogBeats uint64
}

// New returns a host with no groups.
func New(cfg Config) (*Host, error) {
	if cfg.Node == 0 || cfg.Engine == nil || cfg.Transport == nil {
		return nil, fmt.Errorf("multiraft: Config needs Node (non-zero), Engine and Transport")
	}
	cfg.defaults()
	h := &Host{cfg: cfg, groups: map[GroupID]*group{}, creating: map[GroupID]bool{}, active: map[GroupID]*group{},
		dirty: map[GroupID]struct{}{}, peers: map[NodeID]*peer{}, work: make(chan struct{}, 1),
		storeBudget: snapshotStoreBudget}
	h.prepCtx, h.prepCancel = context.WithCancel(context.Background())
	h.SetOnDiskFull(cfg.OnDiskFull)
	// Sequence numbers start at random, so a restarted node's proposals never carry the
	// header of an entry its previous run left in the log.
	h.nextSeq = rand.Uint64() >> 1
	for _, p := range cfg.Peers {
		if p != cfg.Node {
			h.peers[p] = &peer{alive: true}
		}
	}
	return h, nil
}

// Node is the host's node ID.
func (h *Host) Node() NodeID { return h.cfg.Node }

// CreateGroup starts hosting group id with state machine sm. If this node has no state for
// the group yet and voters is not empty, the group is bootstrapped with those voters (every
// initial member must be created with the same list); with no voters it starts empty and
// waits for its leader to send it the log (a node being added). If the engine already holds
// the group, its state is reopened (after a restart) and voters is ignored.
//
// The state machine's Restore runs without the host's lock: a partition's Restore may pull
// records from a peer (a request through the transport) for as long as that takes, and the
// host's other groups carry on meanwhile.
func (h *Host) CreateGroup(id GroupID, voters []NodeID, sm StateMachine) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrStopped
	}
	if h.groups[id] != nil || h.creating[id] {
		h.mu.Unlock()
		return ErrGroupExists
	}
	h.creating[id] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.creating, id)
		h.mu.Unlock()
	}()
	st, err := h.cfg.Engine.Group(id)
	if err != nil {
		return fmt.Errorf("multiraft: open group %d: %w", id, err)
	}
	snap, fresh, err := h.openStorage(id, st, voters)
	if err != nil {
		return err
	}
	if err := sm.Restore(snap.Data); err != nil {
		return fmt.Errorf("multiraft: group %d: restore snapshot at %d: %w", id, snap.Metadata.Index, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrStopped
	}
	cst := newCachedStorage(st)
	rn, err := raft.NewRawNode(h.raftConfig(cst, snap.Metadata.Index))
	if err != nil {
		return fmt.Errorf("multiraft: group %d: %w", id, err)
	}
	g := &group{id: id, rn: rn, store: cst, sm: sm, cs: snap.Metadata.ConfState,
		applied: snap.Metadata.Index, snapIndex: snap.Metadata.Index,
		pending: map[uint64]*Proposal{}, byIndex: map[uint64]*Proposal{},
		blank: fresh && len(voters) == 0}
	h.groups[id], h.active[id] = g, g
	h.markDirty(g)
	return nil
}

// openStorage bootstraps an empty group's storage with an initial snapshot (index 1, term
// 1, the voters) and returns the storage's snapshot, and whether the storage was empty.
func (h *Host) openStorage(id GroupID, st Storage, voters []NodeID) (snap raftpb.Snapshot, fresh bool, err error) {
	snap, err = st.Snapshot()
	if err != nil {
		return snap, false, fmt.Errorf("multiraft: group %d: read snapshot: %w", id, err)
	}
	hs, _, err := st.InitialState()
	if err != nil {
		return snap, false, fmt.Errorf("multiraft: group %d: read state: %w", id, err)
	}
	last, err := st.LastIndex()
	if err != nil {
		return snap, false, fmt.Errorf("multiraft: group %d: read last index: %w", id, err)
	}
	fresh = raft.IsEmptyHardState(hs) && raft.IsEmptySnap(snap) && last == 0
	if !fresh || len(voters) == 0 {
		return snap, fresh, nil
	}
	cs := raftpb.ConfState{}
	for _, v := range voters {
		cs.Voters = append(cs.Voters, uint64(v))
	}
	snap = raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1, Term: 1, ConfState: cs}}
	if err := st.ApplySnapshot(snap); err != nil {
		return snap, true, fmt.Errorf("multiraft: group %d: bootstrap: %w", id, err)
	}
	if err := st.SetHardState(raftpb.HardState{Term: 1, Commit: 1}); err != nil {
		return snap, true, fmt.Errorf("multiraft: group %d: bootstrap: %w", id, err)
	}
	if err := h.cfg.Engine.Sync([]Storage{st}); err != nil {
		return snap, true, fmt.Errorf("multiraft: group %d: bootstrap sync: %w", id, err)
	}
	return snap, true, nil
}

func (h *Host) raftConfig(st Storage, applied uint64) *raft.Config {
	return &raft.Config{
		ID:            uint64(h.cfg.Node),
		ElectionTick:  h.cfg.ElectionTicks,
		HeartbeatTick: h.cfg.HeartbeatTicks,
		Storage:       st,
		Applied:       applied,

		MaxSizePerMsg:    h.cfg.MaxSizePerMsg,
		MaxInflightMsgs:  h.cfg.MaxInflightMsgs,
		MaxInflightBytes: h.cfg.MaxInflightBytes,
		// A leader refuses proposals past 64 MiB of uncommitted log (ErrProposalDropped)
		// rather than growing without bound while it cannot commit.
		MaxUncommittedEntriesSize: 64 << 20,

		CheckQuorum: true,
		PreVote:     true,
		// A proposal is made on the leader or refused with the leader's ID: the caller
		// forwards, so it learns where the group is led.
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    h.cfg.Logger,
	}
}

// RemoveGroup stops hosting group id on this node and deletes its storage. Waiting
// proposals fail with ErrRemoved. (Taking the node out of the group's membership first is
// the caller's business: ChangeMembership.)
func (h *Host) RemoveGroup(id GroupID) error {
	h.mu.Lock()
	g := h.groups[id]
	if g == nil {
		h.mu.Unlock()
		return ErrGroupUnknown
	}
	delete(h.groups, id)
	delete(h.active, id)
	delete(h.dirty, id)
	g.failAll(ErrRemoved)
	h.mu.Unlock()
	// Wait out a round that may still hold the group's Ready before dropping its storage.
	h.readyMu.Lock()
	defer h.readyMu.Unlock()
	return h.cfg.Engine.RemoveGroup(id)
}

// Close stops the host: waiting proposals fail with ErrStopped and every call after it
// fails or does nothing; snapshot preparations under way are cancelled and have returned
// when Close does. The engine is the caller's to close.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	for _, g := range h.groups {
		g.failAll(ErrStopped)
	}
	h.signal() // a Run waiting for work sees it closed
	h.mu.Unlock()
	h.prepCancel()
	h.prepWG.Wait()
}

// Tick advances the host's clock by one tick: every active group's RawNode ticks, idle
// leaders may quiesce their groups, and peer liveness is checked.
func (h *Host) Tick() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.now++
	for _, g := range h.active {
		// Decide before ticking: a tick makes a leader's heartbeats, which is a Ready.
		if h.maybeQuiesce(g) {
			continue
		}
		g.rn.Tick()
		h.stats.GroupTicks++
		g.idle++
		h.markDirty(g)
	}
	h.checkLiveness()
	h.signal()
}

// Receive hands the host a batch from the transport. Messages for groups this node does not
// host are dropped (the group is created here by CreateGroup, never by a message).
func (h *Host) Receive(b Batch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || b.To != h.cfg.Node {
		return
	}
	h.heard(b.From)
	for _, m := range b.Messages {
		g := h.groups[m.Group]
		if g == nil || g.failed != nil || m.Msg.To != uint64(h.cfg.Node) || m.Msg.From != uint64(b.From) {
			continue
		}
		if m.Quiesce && h.quiesceFollower(g, m.Msg) {
			continue
		}
		if g.blank && refusedWhileBlank(m.Msg.Type) {
			h.stats.VotesRefused++
			continue
		}
		if h.commitPastLog(g, m.Msg) {
			continue
		}
		if h.maybePrepare(g, m.Msg) {
			continue
		}
		if h.diskFull != nil && m.Msg.Type == raftpb.MsgApp {
			// Stalled on a full disk (diskfull.go): raft would keep these entries in
			// memory, unanswered, up to each leader's in-flight limit per group; dropped,
			// they are sent again once this node answers.
			h.stats.AppendsDroppedWhileFull++
			continue
		}
		h.wake(g)
		// Step refuses local message types and messages of unknown peers; dropping them
		// is all a receiver can do.
		_ = g.rn.Step(m.Msg)
		h.markDirty(g)
	}
	// A liveness beat (an empty batch) or a consumed quiesce heartbeat leaves nothing for
	// the Ready loop: waking it anyway was a goroutine wake-up and an empty round per beat
	// per peer, a good part of an idle cluster's CPU.
	if len(h.dirty) > 0 {
		h.signal()
	}
}

// Stats returns the host's counters.
func (h *Host) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stats
	st.Groups, st.Awake = len(h.groups), len(h.active)
	st.DiskFull = h.diskFull != nil || h.prepFullLocked() != nil
	for _, p := range h.peers {
		if !p.alive {
			st.PeersDown++
		}
	}
	return st
}

// Groups lists the groups hosted here, in ID order.
func (h *Host) Groups() []GroupID {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]GroupID, 0, len(h.groups))
	for id := range h.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// markDirty notes that g may have a Ready. While Run sleeps no tick will come to take it
// (CreateGroup, for one, signals nothing else), so Run is woken.
func (h *Host) markDirty(g *group) {
	h.dirty[g.id] = struct{}{}
	if h.clk.asleep {
		h.signal()
	}
}

func (h *Host) signal() {
	select {
	case h.work <- struct{}{}:
	default:
	}
}

// quietLogger reports raft's errors and panics on its panics; raft's chatter is dropped.
type quietLogger struct{}

func (quietLogger) Debug(...any)              {}
func (quietLogger) Debugf(string, ...any)     {}
func (quietLogger) Info(...any)               {}
func (quietLogger) Infof(string, ...any)      {}
func (quietLogger) Warning(...any)            {}
func (quietLogger) Warningf(string, ...any)   {}
func (quietLogger) Error(v ...any)            { log.Print(append([]any{"raft: "}, v...)...) }
func (quietLogger) Errorf(f string, v ...any) { log.Printf("raft: "+f, v...) }
func (quietLogger) Fatal(v ...any)            { log.Fatal(v...) }
func (quietLogger) Fatalf(f string, v ...any) { log.Fatalf(f, v...) }
func (quietLogger) Panic(v ...any)            { log.Panic(v...) }
func (quietLogger) Panicf(f string, v ...any) { log.Panicf(f, v...) }
