package api

// The request limits of the native API, exported so that the CLI checks
// its flags against the very numbers the server enforces (a flag refused
// before the call names the flag; the server's refusal names a field).
const (
	MaxSendBatch    = maxSendBatch    // messages of one SendBatch
	MaxReceiveBatch = maxReceiveBatch // max_messages of one Receive
	MaxAckBatch     = maxAckBatch     // receipts of one AckBatch
	MaxReceiveWait  = maxReceiveWait  // a Receive's long-poll wait
	MaxFetchWait    = maxFetchWait    // a Fetch's max_wait
)
