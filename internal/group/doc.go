// Package group is the consumer-group coordinator: membership, generations,
// rebalances, partition assignment and committed offsets, for every
// front-end (the native API assigns through the broker; Kafka's classic
// protocol relays the leader's assignment, opaque except when a group is
// described, where a Kafka consumer's is read to show who holds what;
// KIP-848 consumer groups are assigned by the coordinator through
// heartbeats, consumer*.go).
//
// # What it owns, and what it must never do
//
// It owns the state machine and nothing else. It must never do I/O, start
// goroutines, read the clock or draw random numbers: every call takes the
// current time from the caller, and everything that happened comes back as
// values, so every rebalance is reproducible in tests on a fake clock. The
// broker wraps a Coordinator with one mutex (or goroutine), journals the
// returned Events before acknowledging, delivers completed tickets to
// waiting requests, calls Tick at NextDeadline, and feeds topic partition
// counts through SetPartitions. Output also reports removed members (with
// the reason) and state transitions, for logs and metrics.
//
// # State machine (per group)
//
//	             join                    everyone rejoined, or rebalance timeout
//	Empty ─────────────────► PreparingRebalance ──────────────────────► CompletingRebalance
//	  ▲                        │     ▲     ▲                                 │         │
//	  │   no member left       │     │     │  join, leave, expiry,           │         │ leader's
//	  └────────────────────────┘     │     │  sync timeout                   │         │ Sync
//	      (generation+1)             │     └─────────────────────────────────┘         ▼
//	                                 │   join (leader, or new metadata), leave,      Stable
//	                                 └── expiry, partition count change ───────────────┘
//
// BrokerAssigns skips CompletingRebalance: the coordinator assigns when the
// generation forms, and the group is Stable at once.
//
// Join and Sync are asynchronous, as in Kafka: they return a Ticket, and
// the answer for it arrives in the Output of the same call or of a later
// one (another member's Join or Sync, a Leave, Tick). A member waiting on a
// ticket is not expired; any other member whose session timeout passes
// without a heartbeat, commit, join or sync is removed by Tick, and its
// removal rebalances the group. A rebalance waits for every known member to
// rejoin, up to the largest rebalance timeout among them; members that did
// not rejoin by then are dropped.
//
// # Fencing
//
// Heartbeat, Sync and Commit name a member id and generation. A member that
// is not in the group gets ErrUnknownMember, a stale generation
// ErrIllegalGeneration, a static member replaced by a newer instance
// ErrFencedInstanceID. So a member of an old generation can never commit
// over the offsets of the current owner. A commit with generation -1
// (manual offset management, outside the group protocol) is accepted only
// while the group is Empty. Members of the current generation may commit
// during PreparingRebalance (they commit while revoking partitions), not
// during CompletingRebalance. In BrokerAssigns mode a member may also only
// commit partitions it owns (ErrNotAssigned).
//
// # Static membership
//
// A member joining with an instance id (Kafka group.instance.id) that the
// group already knows takes that place back under a new member id; the old
// id is fenced (ErrFencedInstanceID). In a Stable group, with unchanged
// protocols and not the leader, it inherits the assignment without a
// rebalance. Unlike Kafka, a static member that misses a rebalance is
// dropped like a dynamic one; static members are journaled only with
// the rest of the membership (Config.DurableMembership).
//
// # Assignment
//
// LeaderAssigns: the coordinator picks the protocol every member supports
// with the most first-choice votes, tells the leader everyone's metadata,
// and relays the leader's opaque per-member assignments in Sync.
// BrokerAssigns: the protocol names an assignor ("range" or "roundrobin");
// the coordinator assigns the partitions of the members' topics (counts
// given by SetPartitions) so that each partition has exactly one owner,
// and members beyond the partition count stay idle. Assignments are
// replaced only when a new generation forms, so at any moment a partition
// has at most one owner.
//
// # KIP-848 consumer groups
//
// A group is classic or consumer ("cg" set), never both: ConsumerHeartbeat
// to a classic group with members is ErrGroupNotFound, a classic Join to a
// consumer group with members ErrInconsistentProtocol; an empty group of
// either type becomes the other when that joins. A consumer group has a
// group epoch (bumped by joins, leaves, fences, subscription changes and
// partition counts of subscribed topics), a target assignment computed by
// the server assignor ("uniform", sticky; or "range") at the group epoch,
// and members with a member epoch each. reconcile moves one member one
// step per heartbeat: partitions to revoke leave its assignment first and
// it keeps its epoch until a heartbeat's owned partitions no longer list
// them; then it takes the target epoch and the target partitions no other
// member holds (owner). So a partition never has two owners; the model
// test checks it. Sessions (ConsumerConfig.SessionTimeout) and revocations
// (the member's rebalance timeout) expire in Tick. Commits are fenced by
// member epoch (ErrStaleMemberEpoch; an older epoch only for partitions
// held since then). Consumer-group membership is soft state like classic
// membership unless Config.DurableMembership (see Durability); the
// group's type is durable (EventGroupProtocol).
//
// # Durability
//
// Committed offsets (and their deletion), a group's protocol type and
// assignment mode (set when its first member joins), and group deletion
// survive a restart; they are returned as Events, encoded as below, and
// replayed with Apply. Snapshot returns the events that rebuild the
// current offsets, for journal compaction. By default membership,
// generations and assignments are not journaled: after a restart every
// group is Empty, members get ErrUnknownMember (or ErrIllegalGeneration),
// rejoin and resume from their committed offsets, which costs one
// rebalance and saves a journal write for every membership change. With
// Config.DurableMembership (a cluster, whose coordinator moves) a classic
// group's membership is an EventGroupMembers record too, a group becomes
// Stable only once its record is Stored, and a replayed coordinator keeps
// the members (Resume): see membership.go, and membership_codec.go for
// the record's encoding (event type 5, version 1). A KIP-848 consumer
// group's state is an EventConsumerMembers record (type 6, version 1,
// consumer_record.go), written whenever a call changed it. A running
// coordinator turns the records on with RecordMemberships (a cluster does,
// once every node reads them), which records every group it has then.
// Member ids include
// Config.Incarnation so an id from before a restart is never reissued.
//
// Event encoding (varint and uvarint as in encoding/binary; string =
// uvarint length then bytes):
//
//	+---------+------+-------------+
//	| version | type | group       |          version = 1 or 2
//	| byte    | byte | string      |          type 2 (group deleted) ends here
//	+---------+------+-------------+
//	| protocol type string | mode byte |      type 4 (group protocol) ends here
//	+----------------------+-----------+
//	| time ms (varint) | count (uvarint) |    type 1 (offsets committed) and
//	+------------------+-----------------+    type 3 (offsets deleted: only
//	                                          topic and partition matter)
//	| topic string | partition uvarint | offset uvarint |   × count
//	| leader epoch varint | metadata string               |
//	+--------------------------------------------------------+
//
// Each offset's CommitTime is the event's time. No trailing bytes. Version 2
// differs only in the offset, a varint: it carries Kafka's sentinels -1
// (latest) and -2 (earliest), which clients commit to reset a group, and
// it is written only when an event holds one, so journals without them stay
// version 1 and readable by older builds; a version 2 event without a
// negative offset is refused as corrupt (one encoding per event).
//
// # Guarantees
//
// What this gives users (one owner per partition, fenced commits, replay)
// is stated in docs/semantics.md, under Streams.
package group
