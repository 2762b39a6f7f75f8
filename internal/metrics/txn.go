package metrics

import "github.com/prometheus/client_golang/prometheus"

// TxnStat is a single node's Kafka transaction coordinator log
// (transactions.log): its records and fdatasyncs since the broker started.
type TxnStat struct {
	Records, Syncs uint64
}

// TxnSource is a Source that also reports the transaction coordinator's
// log; SourceFuncs is one when its Txn func is set and says there is one.
type TxnSource interface {
	TxnStats() (TxnStat, bool)
}

// TxnStats reports f.Txn's answer; ok is false without one (a cluster
// node, whose coordinator's records are metadata-group entries).
func (f SourceFuncs) TxnStats() (TxnStat, bool) {
	if f.Txn == nil {
		return TxnStat{}, false
	}
	return f.Txn()
}

var (
	txnLogRecords = desc("txn_log_records_total", "Records the Kafka transaction coordinator wrote to transactions.log (one per step of a transaction).")
	txnLogSyncs   = desc("txn_log_syncs_total", "fdatasyncs of transactions.log; txn_log_records_total over this is how many records each sync made durable (the group commit of transactions running at once).")
)

var txnDescs = []*prometheus.Desc{txnLogRecords, txnLogSyncs}

func collectTxn(ch chan<- prometheus.Metric, s TxnStat) {
	ch <- prometheus.MustNewConstMetric(txnLogRecords, prometheus.CounterValue, float64(s.Records))
	ch <- prometheus.MustNewConstMetric(txnLogSyncs, prometheus.CounterValue, float64(s.Syncs))
}
