package load

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable writes results as a Markdown table: one row per result, its
// Target first.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| target | workload | msgs/s | MB/s | p50 ms | p99 ms | p99.9 ms | max ms | latency is | sent | received | missing |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, r := range results {
		l := r.Latency
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %d | %d | %d |\n",
			r.Target, r.Workload, Thousands(r.MsgsPerSec), r.MBPerSec,
			ms(l.P50, l.Count), ms(l.P99, l.Count), ms(l.P999, l.Count), ms(l.Max, l.Count), l.What,
			r.Sent, r.Received, r.Missing)
		if a := r.AckLatency; a != nil {
			fmt.Fprintf(&b, "| %s | %s | | | %s | %s | %s | %s | %s | %d | | |\n", r.Target, r.Workload,
				ms(a.P50, a.Count), ms(a.P99, a.Count), ms(a.P999, a.Count), ms(a.Max, a.Count), a.What, r.Sent)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(v float64, n uint64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// Thousands formats v rounded to an integer with comma separators.
func Thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
