package metrics

import "github.com/prometheus/client_golang/prometheus"

// connMetrics are the network edge's instruments, one series per listener
// (http, kafka, sqs): a fixed, small label set.
type connMetrics struct {
	open         *prometheus.GaugeVec
	accepted     *prometheus.CounterVec
	refused      *prometheus.CounterVec
	idleClosed   *prometheus.CounterVec
	acceptErrors *prometheus.CounterVec
	handshakes   *prometheus.CounterVec // failed TLS handshakes
}

func newConnMetrics() connMetrics {
	labels := []string{"listener"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	return connMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "connections_open",
			Help: "Client connections open on a listener.",
		}, labels),
		accepted: counter("connections_accepted_total", "Client connections accepted on a listener, refused ones excluded."),
		refused: counter("connections_refused_total",
			"Connections closed as soon as accepted because the listener held its maximum (HTTP listeners answer 503 first)."),
		idleClosed: counter("connections_idle_closed_total",
			"Connections the server closed because no request came within the listener's idle timeout."),
		acceptErrors: counter("accept_errors_total",
			"Failed accepts from running out of file descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM); the listener backs off and retries."),
		handshakes: counter("tls_handshake_errors_total",
			"TLS handshakes that failed or timed out (the read-header timeout) on a TLS listener; the connection is closed."),
	}
}

func (c connMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.open, c.accepted, c.refused, c.idleClosed, c.acceptErrors, c.handshakes}
}

// Listener is one listener's connection instruments. Its methods are safe
// for concurrent use, and do nothing on a nil *Listener (tests that build a
// front-end without a registry).
type Listener struct {
	open                                        prometheus.Gauge
	accepted, refused, idleClosed, acceptErrors prometheus.Counter
	handshakes                                  prometheus.Counter // nil but on TLS listeners
}

// Listener returns the instruments of the listener called name, creating
// its series at zero so dashboards see them before the first event.
func (m *Metrics) Listener(name string) *Listener {
	c := m.conns
	return &Listener{
		open: c.open.WithLabelValues(name), accepted: c.accepted.WithLabelValues(name),
		refused: c.refused.WithLabelValues(name), idleClosed: c.idleClosed.WithLabelValues(name),
		acceptErrors: c.acceptErrors.WithLabelValues(name),
	}
}

// TLSListener is Listener for a TLS listener: it also counts failed
// handshakes.
func (m *Metrics) TLSListener(name string) *Listener {
	l := m.Listener(name)
	l.handshakes = m.conns.handshakes.WithLabelValues(name)
	return l
}

// HandshakeFailed counts a TLS handshake that failed or timed out.
func (l *Listener) HandshakeFailed() {
	if l != nil && l.handshakes != nil {
		l.handshakes.Inc()
	}
}

// Opened counts a connection accepted and now open.
func (l *Listener) Opened() {
	if l != nil {
		l.accepted.Inc()
		l.open.Inc()
	}
}

// Closed counts an open connection closed, for whatever reason.
func (l *Listener) Closed() {
	if l != nil {
		l.open.Dec()
	}
}

// Refused counts a connection refused at the listener's limit.
func (l *Listener) Refused() {
	if l != nil {
		l.refused.Inc()
	}
}

// IdleClosed counts a connection closed for being idle too long.
func (l *Listener) IdleClosed() {
	if l != nil {
		l.idleClosed.Inc()
	}
}

// AcceptError counts an accept that failed for lack of resources.
func (l *Listener) AcceptError() {
	if l != nil {
		l.acceptErrors.Inc()
	}
}
