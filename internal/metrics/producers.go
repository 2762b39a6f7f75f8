package metrics

import "github.com/prometheus/client_golang/prometheus"

// ProducerStat is the idempotent producers a node remembers, and how many it forgot after
// producer.id.expiration (--producer-id-expiration) since it started.
type ProducerStat struct {
	Remembered int64
	Expired    uint64
}

// ProducerSource is a Source that also reports the idempotent producers; SourceFuncs is
// one when its Producers func is set.
type ProducerSource interface {
	ProducerStats() (ProducerStat, bool)
}

// ProducerStats reports f.Producers' answer; ok is false without one.
func (f SourceFuncs) ProducerStats() (ProducerStat, bool) {
	if f.Producers == nil {
		return ProducerStat{}, false
	}
	return f.Producers(), true
}

var (
	producersRemembered = desc("idempotent_producers", "Idempotent producer ids remembered over the partitions this node holds (a producer of n partitions counts n times); each costs memory and bytes in every producer snapshot and replicated checkpoint. It falls as retention removes a producer's last batch and as idle producers expire.")
	producersExpired    = desc("idempotent_producers_expired_total", "Idempotent producers forgotten after producer.id.expiration (--producer-id-expiration) without writing; a forgotten producer's next batch is accepted at any sequence, as Kafka does.")
)

var producerDescs = []*prometheus.Desc{producersRemembered, producersExpired}

func collectProducers(ch chan<- prometheus.Metric, s ProducerStat) {
	ch <- prometheus.MustNewConstMetric(producersRemembered, prometheus.GaugeValue, float64(s.Remembered))
	ch <- prometheus.MustNewConstMetric(producersExpired, prometheus.CounterValue, float64(s.Expired))
}
