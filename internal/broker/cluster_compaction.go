package broker

// Compacted topics in a cluster (docs/cluster.md, "Compacted topics").
//
// Each replica cleans its own local log, with the single node's cleaner and the topic's
// settings; nothing about cleaning goes through Raft. Replicas clean at their own moments,
// so two may hold different, equally valid compacted logs: the same records at the same
// offsets, the same latest record per key, more or fewer superseded ones. That is Kafka's
// model too, and it holds for everything that reads a replica's log by offset (fetches on
// the leader, the pull that refills a replica, which sends the offsets a cleaner left
// without a batch as empty batches: cluster_replica_pull.go), but not for a subscription's
// cursor: it reads the local log as its receives apply, on every replica, and replicas
// holding different superseded records would lease different ones. So a partition is
// cleaned only while its topic has no subscription, and a subscription of a compacted
// topic starts at the log's end (a cursor started at the start of logs cleaned apart would
// read them apart).

// cleanable reports whether this node's cleaner may clean p: a replica of it is hosted
// here and its catalog topic has no subscription. A partition not hosted here has no log
// worth cleaning; an unreplicated topic (one the node had before it joined a cluster) is
// cleaned as on a single node.
func (c *clusterRT) cleanable(p *partitionRT) bool {
	ct, ok := c.clusteredTopic(p.topic)
	if !ok {
		return true
	}
	if p.repl.Load() == nil {
		return false
	}
	subs, err := subsOf(ct)
	return err == nil && len(subs) == 0
}

// checkCompactedSubscription refuses a subscription that starts at the log's start on a
// compacted catalog topic (see above).
func checkCompactedSubscription(s SubscriptionSettings, ts TopicSettings) error {
	if s.FromEarliest && ts.CleanupPolicy != CleanupDelete {
		return invalid("from_earliest", "a subscription of compacted topic %s in a cluster starts at the log's end: "+
			"its replicas clean their logs apart (docs/cluster.md, %q)", ts.Name, "Compacted topics")
	}
	return nil
}
