package main

import (
	"fmt"
	"strings"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// reference picks the sluice row each peer row of workload w is divided
// into: same fsync-before-ack class, the protocol the goals name (or the
// best sluice row of that class if that one is missing).
func reference(rows []row, w, proto string, sync bool) *row {
	var best *row
	for i := range rows {
		r := &rows[i]
		if r.Workload != w || r.System != "sluice" || r.SyncBefore != sync {
			continue
		}
		if r.Protocol == proto {
			return r
		}
		if best == nil || r.Result.MsgsPerSec > best.Result.MsgsPerSec {
			best = r
		}
	}
	return best
}

func writeWorkload(b *strings.Builder, w, title, proto string, rows []row, disk load.Disk) {
	var these []row
	for _, r := range rows {
		if r.Workload == w {
			these = append(these, r)
		}
	}
	if len(these) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### %s\n\n", title)
	if w == "W4" {
		writeMemory(b, these, proto)
		return
	}
	latencyRatio := w == "W3"
	ratio := "sluice ÷ this (msgs/s)"
	if latencyRatio {
		ratio = "sluice p99 ÷ this p99 (lower is better for sluice)"
	}
	b.WriteString("| system (settings) | protocol | fsync before ack | msgs/s | MB/s | % of synced disk bandwidth | p50 ms | p99 ms | p99.9 ms | max ms | missing | " + ratio + " |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range these {
		res, l := r.Result, r.Result.Latency
		cell := "—"
		if ref := reference(rows, w, proto, r.SyncBefore); ref != nil && r.System != "sluice" {
			if latencyRatio && l.P99 > 0 {
				cell = fmt.Sprintf("%.3g (vs sluice %s, %s)", ref.Result.Latency.P99/l.P99, ref.Protocol, ref.Config)
			} else if res.MsgsPerSec > 0 {
				cell = fmt.Sprintf("%.3g (vs sluice %s, %s)", ref.Result.MsgsPerSec/res.MsgsPerSec, ref.Protocol, ref.Config)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %.1f | %.0f%% | %.2f | %.2f | %.2f | %.2f | %d | %s |\n",
			r.name(), r.Protocol, yesNo(r.SyncBefore), load.Thousands(res.MsgsPerSec), res.MBPerSec,
			100*res.MBPerSec/max(disk.SyncedMBPerSec, 1e-9), l.P50, l.P99, l.P999, l.Max, res.Missing, cell)
	}
	b.WriteString("\nDurability classes (what is on disk when the ack is sent):\n\n")
	seen := map[string]bool{}
	for _, r := range these {
		if !seen[r.name()] {
			seen[r.name()] = true
			fmt.Fprintf(b, "- %s: %s\n", r.name(), r.Durability)
		}
	}
}

func writeMemory(b *strings.Builder, rows []row, proto string) {
	var ref *row
	for i := range rows {
		if rows[i].System == "sluice" && (ref == nil || rows[i].Protocol == proto) {
			ref = &rows[i]
		}
	}
	b.WriteString("| system (settings) | backlog messages | fill msgs/s | VmRSS empty MiB | VmRSS with backlog MiB | with ÷ empty | process-tree PSS empty → with backlog MiB | sluice VmRSS ÷ this (with backlog) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|---:|\n")
	for _, r := range rows {
		e, f := r.Empty, r.Full
		cell := "—"
		if ref != nil && r.System != "sluice" && f.VmRSSKiB > 0 {
			cell = fmt.Sprintf("%.2f", float64(ref.Full.VmRSSKiB)/float64(f.VmRSSKiB))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | %.0f | %.2f | %.0f → %.0f (%d processes) | %s |\n",
			r.name(), load.Thousands(float64(r.Result.Sent)), load.Thousands(r.Result.MsgsPerSec),
			mib(e.VmRSSKiB), mib(f.VmRSSKiB), float64(f.VmRSSKiB)/float64(max(e.VmRSSKiB, 1)),
			mib(e.TreePssKB), mib(f.TreePssKB), f.Processes, cell)
	}
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}
