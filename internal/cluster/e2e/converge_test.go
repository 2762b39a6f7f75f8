package e2e

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

// stored is one record of a partition log as a node's data directory holds it.
type stored struct {
	offset int64
	epoch  int32 // the batch's leader epoch: the Raft term of its entry
	value  string
}

// readPartition reads topic/0 of a stopped node from its data directory, whole.
func readPartition(t *testing.T, dir, topic string) []stored {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(dir, "topics", "*-"+topic, "0"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("%s: want one directory of %s/0, found %v (%v)", dir, topic, dirs, err)
	}
	log, err := storage.Open(storage.Options{Dir: dirs[0]})
	if err != nil {
		t.Fatalf("%s: %v", dirs[0], err)
	}
	defer log.Close()
	var out []stored
	for off := log.LogStartOffset(); off < log.HighWatermark(); {
		buf, err := log.Read(off, 1<<20)
		if err != nil || len(buf) == 0 {
			t.Fatalf("%s: read at %d (high watermark %d): %v", dirs[0], off, log.HighWatermark(), err)
		}
		for len(buf) > 0 {
			n, err := batch.FrameSize(buf)
			if err != nil {
				t.Fatalf("%s: %v", dirs[0], err)
			}
			h, _ := batch.ParseHeader(buf[:n])
			i := h.BaseOffset
			for r, err := range batch.Records(buf[:n]) {
				if err != nil {
					t.Fatalf("%s: batch at %d: %v", dirs[0], h.BaseOffset, err)
				}
				out = append(out, stored{offset: i, epoch: h.PartitionLeaderEpoch, value: string(r.Value)})
				i++
			}
			off = h.NextOffset()
			buf = buf[n:]
		}
	}
	return out
}

// checkConverged reads topic/0 from every (stopped) node's data directory and checks
// that the logs are one log, that every acknowledged record is in it once, at the offset
// its acknowledgement gave, and that no term's records were acknowledged by two nodes.
func checkConverged(t *testing.T, c *cluster, topic string, acks []ack) {
	t.Helper()
	logs := make([][]stored, len(c.dirs))
	for i, dir := range c.dirs {
		logs[i] = readPartition(t, dir, topic)
	}
	for i := 1; i < len(logs); i++ {
		if !slices.Equal(logs[i], logs[0]) {
			n := min(len(logs[0]), len(logs[i]))
			at := n
			for k := range n {
				if logs[0][k] != logs[i][k] {
					at = k
					break
				}
			}
			t.Errorf("node %d's log (%d records) differs from node 1's (%d) from record %d on", i+1, len(logs[i]), len(logs[0]), at)
		}
	}
	byOffset := map[int64]stored{}
	times := map[string]int{}
	for _, s := range logs[0] {
		byOffset[s.offset] = s
		times[s.value]++
	}
	ackers := map[int32]map[int]bool{} // term -> nodes that acknowledged records of it
	lost, twice := 0, 0
	for _, a := range acks {
		s, ok := byOffset[a.offset]
		switch {
		case !ok || s.value != a.value:
			if lost++; lost <= 5 {
				t.Errorf("%s, acknowledged by node %d at offset %d, is not there (the log has %q)", a.value, a.node, a.offset, s.value)
			}
			continue
		case times[a.value] != 1:
			if twice++; twice <= 5 {
				t.Errorf("%s is in the log %d times", a.value, times[a.value])
			}
		}
		if ackers[s.epoch] == nil {
			ackers[s.epoch] = map[int]bool{}
		}
		ackers[s.epoch][a.node] = true
	}
	if lost+twice > 0 {
		t.Errorf("of %d acknowledged records, %d are not at their offset and %d are stored more than once", len(acks), lost, twice)
	}
	for term, nodes := range ackers {
		if len(nodes) > 1 {
			t.Errorf("records of term %d were acknowledged by nodes %v: two leaders in one term", term, nodes)
		}
	}
	t.Logf("node 1's log: %d records; %d acknowledged; terms with acknowledged writes: %d",
		len(logs[0]), len(acks), len(ackers))
}
