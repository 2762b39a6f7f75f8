package node

import (
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"github.com/sluice-mq/sluice/internal/diskguard"
	"github.com/sluice-mq/sluice/internal/metrics"
)

// metricsSource adapts the broker's stats, the free space of the file system under
// dataDir, and in a cluster (cn not nil) its transport's, to what /metrics reads at
// scrape time.
func metricsSource(b *broker.Broker, dataDir string, cn *clusterNode) metrics.Source {
	return metrics.SourceFuncs{Queues: queueStats(b), Groups: groupStats(b), Topics: topicStats(b),
		Storage: func() metrics.StorageStat {
			st := b.StorageStats()
			free, size := diskguard.DiskSpace(dataDir)
			pulls := b.ReplicaPullStats()
			return metrics.StorageStat{OpenFiles: st.OpenFiles, MaxOpenFiles: st.MaxOpenFiles,
				FileEvictions: uint64(st.FileEvictions), CorruptBatches: uint64(st.CorruptBatches),
				WriteFailing: st.WriteFailure != nil, DiskFreeBytes: free, DiskSizeBytes: size,
				ReplicaPulls: pulls.Pulls, ReplicaPullBytes: pulls.Bytes, ReplicaPullFailures: pulls.Failures,
				ReplicaPullRemaining: pulls.Target - pulls.At}
		},
		Compaction: func() metrics.CompactionStats {
			parts, tot := b.CompactionStats()
			out := metrics.CompactionStats{BytesRead: tot.BytesRead, BytesWritten: tot.BytesWritten,
				AbortedRemoved: tot.AbortedRemoved, MarkersRemoved: tot.MarkersRemoved}
			for _, p := range parts {
				out.Partitions = append(out.Partitions, metrics.CompactionStat{Topic: p.Topic, Partition: p.Partition,
					DirtyRatio: p.DirtyRatio, LastClean: p.LastClean})
			}
			return out
		},
		Raft: func() (metrics.RaftStat, bool) {
			st, ok := b.RaftStats()
			level, reads := b.FeatureLevels()
			var ts tcptransport.Stats
			if cn != nil {
				ts = cn.tr.Stats()
			}
			return metrics.RaftStat{StreamsOpened: ts.StreamsDialled, StreamsAccepted: ts.StreamsAccepted,
				Groups: st.Groups, Awake: st.Awake, PeersDown: st.PeersDown, NotPreferred: b.LeadersNotPreferred(),
				GroupTicks: st.GroupTicks, Rounds: st.Rounds, Syncs: st.Syncs, Readys: st.Readys,
				Batches: st.Batches, Messages: st.Messages, Quiesces: st.Quiesces, Wakes: st.Wakes,
				SnapshotsSent: st.SnapsSent, SnapshotsRestored: st.SnapsTaken,
				SnapshotsCreated: st.SnapsCreated, SnapshotBytes: st.SnapBytesCreated,
				VotesRefused: st.VotesRefused, LostLogBeats: st.LostLogBeats, TransportRefused: b.TransportRefused(),
				FeatureLevel: level, ReadsFeatureLevel: reads, GroupStateTooLarge: b.GroupStateTooLarge(),
				DiskFull: st.DiskFull, DiskFullStalls: st.DiskFullStalls}, ok
		},
		Txn: func() (metrics.TxnStat, bool) {
			st, ok := b.TxnLogStats()
			return metrics.TxnStat{Records: st.Records, Syncs: st.Syncs}, ok
		},
		Producers: func() metrics.ProducerStat {
			st := b.ProducerStats()
			return metrics.ProducerStat{Remembered: st.Remembered, Expired: st.Expired}
		}}
}

func groupStats(b *broker.Broker) func() []metrics.GroupStat {
	return func() []metrics.GroupStat {
		var out []metrics.GroupStat
		for _, g := range b.AllGroupLag() {
			for _, p := range g.Partitions {
				out = append(out, metrics.GroupStat{Group: g.Group, Topic: p.Topic, Partition: p.Partition,
					LagMessages: p.Messages, LagAge: p.Age})
			}
		}
		return out
	}
}

// topicStats reports retention headroom for topics with time retention
// (a topic kept forever has no headroom to watch).
func topicStats(b *broker.Broker) func() []metrics.TopicStat {
	return func() []metrics.TopicStat {
		var out []metrics.TopicStat
		for _, t := range b.ListTopics("") {
			h, err := b.RetentionHeadroom(t.Name)
			if err != nil || h.Unlimited {
				continue
			}
			out = append(out, metrics.TopicStat{Topic: t.Name, RetentionHeadroom: h.Headroom})
		}
		return out
	}
}

func queueStats(b *broker.Broker) func() []metrics.QueueStat {
	return func() []metrics.QueueStat {
		// A subscription is a queue cursor: it reports as the queue
		// "<topic>/<subscription>", the name QueueService reads it by.
		all := append(b.AllQueueStats(), b.AllSubscriptionStats()...)
		out := make([]metrics.QueueStat, len(all))
		for i, st := range all {
			name := st.Name
			if st.Topic != "" {
				name = st.Topic + "/" + st.Name
			}
			out[i] = metrics.QueueStat{
				Queue: name, Visible: st.Visible, InFlight: st.InFlight, Delayed: st.Delayed,
				OldestAge: st.OldestAge, DLQDepth: st.DLQDepth, Sent: st.Sent, Received: st.Received,
				Acked: st.Acked, Redelivered: st.Redelivered, DeadLettered: st.DeadLettered,
				StaleAckRefused: st.StaleRefused, Lost: st.Lost, RecoveredGap: st.RecoveredGap,
			}
		}
		return out
	}
}
