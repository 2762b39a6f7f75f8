package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tlsMetrics are the TLS certificate's instruments (docs/security.md,
// "TLS"): reloads by result, and when the certificate served now expires.
type tlsMetrics struct {
	reloads *prometheus.CounterVec
	expiry  prometheus.Gauge
}

func newTLSMetrics() tlsMetrics {
	return tlsMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tls_reloads_total",
			Help: "Certificate reloads (SIGHUP or changed files), by result: ok, or error (the previous certificate is still served).",
		}, []string{"result"}),
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "tls_certificate_expiry_timestamp_seconds",
			Help: "When the TLS certificate served now expires (its NotAfter, Unix seconds); absent without TLS.",
		}),
	}
}

// ObserveTLSReload records a certificate reload's outcome (err nil: the
// new one serves) and the expiry of the certificate served afterwards.
func (m *Metrics) ObserveTLSReload(notAfter time.Time, err error) {
	m.tlsOnce.Do(m.registerTLS)
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.tls.reloads.WithLabelValues(result).Inc()
	m.tls.expiry.Set(float64(notAfter.Unix()))
}

// ObserveTLSCertificate records the expiry of the certificate loaded at
// start, and makes the reload series visible at zero.
func (m *Metrics) ObserveTLSCertificate(notAfter time.Time) {
	m.tlsOnce.Do(m.registerTLS)
	m.tls.expiry.Set(float64(notAfter.Unix()))
}

// registerTLS adds the TLS series to the registry only once TLS is in use,
// so a server without it does not show a certificate expiring in 1970.
func (m *Metrics) registerTLS() {
	m.tls = newTLSMetrics()
	m.tls.reloads.WithLabelValues("ok")
	m.tls.reloads.WithLabelValues("error")
	m.reg.MustRegister(m.tls.reloads, m.tls.expiry)
}
