package outbox

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
)

// Metrics are a relay's counters and gauges, served as Prometheus text by
// Handler. They are written by hand (a few lines of the text format), so
// the relay does not link a metrics library.
type Metrics struct {
	labels    string // {table="…",destination="…"}
	published atomic.Int64
	errors    atomic.Int64
	claims    atomic.Int64
	pending   atomic.Int64
	oldest    atomic.Uint64 // float64 bits: seconds
	slotLag   atomic.Int64  // CDC: bytes of WAL the slot holds behind the server's position; -1 in polling mode
}

func newMetrics(table, dest string) *Metrics {
	m := &Metrics{labels: "{table=" + strconv.Quote(table) + ",destination=" + strconv.Quote(dest) + "}"}
	m.slotLag.Store(-1)
	return m
}

func (m *Metrics) setBacklog(rows int64, oldestSeconds float64) {
	m.pending.Store(rows)
	m.oldest.Store(math.Float64bits(oldestSeconds))
}

// Published is the number of rows relayed (published and marked) so far.
func (m *Metrics) Published() int64 { return m.published.Load() }

// Errors is the number of failed steps so far.
func (m *Metrics) Errors() int64 { return m.errors.Load() }

// Backlog is the unsent rows and the age of the oldest, as last queried.
func (m *Metrics) Backlog() (rows int64, oldestSeconds float64) {
	return m.pending.Load(), math.Float64frombits(m.oldest.Load())
}

// WriteTo writes the metrics in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	type metric struct {
		name, typ, help string
		value           string
	}
	rows, age := m.Backlog()
	ms := []metric{
		{"sluice_outbox_oldest_unsent_age_seconds", "gauge", "Age of the oldest outbox row not yet relayed (0 when none); alert at 30 s.", strconv.FormatFloat(age, 'g', -1, 64)},
		{"sluice_outbox_rows_pending", "gauge", "Outbox rows not yet relayed.", strconv.FormatInt(rows, 10)},
		{"sluice_outbox_published_total", "counter", "Outbox rows published to the broker and marked sent; rate() is the publish rate.", strconv.FormatInt(m.published.Load(), 10)},
		{"sluice_outbox_errors_total", "counter", "Relay steps that failed (database or broker); their rows are published again.", strconv.FormatInt(m.errors.Load(), 10)},
		{"sluice_outbox_claims_total", "counter", "Claims of unsent rows (polls).", strconv.FormatInt(m.claims.Load(), 10)},
	}
	if lag := m.slotLag.Load(); lag >= 0 {
		ms = append(ms, metric{"sluice_outbox_slot_lag_bytes", "gauge", "CDC: WAL bytes between the server's position and the slot's confirmed position.", strconv.FormatInt(lag, 10)})
	}
	var n int64
	for _, x := range ms {
		k, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", x.name, x.help, x.name, x.typ, x.name, m.labels, x.value)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Handler serves the metrics (mount it at /metrics).
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = m.WriteTo(w)
	})
}
