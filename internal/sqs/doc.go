// Package sqs is sluice's Amazon SQS front-end: an http.Handler that speaks
// both wire protocols of the SQS API on one endpoint, AWS JSON 1.0
// (X-Amz-Target: AmazonSQS.<Action>, what current SDKs send) and the query
// protocol (form-encoded Action=…, XML answers; older SDKs, Debian's boto3
// and AWS CLI).
//
// It owns only translation: decode a request (json.go, query.go; the hot
// actions' JSON bodies and answers without reflection, json_decode.go and
// json_encode.go, held to encoding/json by fuzz targets), check the
// SQS-specific limits the broker does not know (DelaySeconds at most 900,
// attribute names and types, batch entry ids), call the broker, and encode
// the answer or map the broker's error through the one table in errors.go.
// One file per action (create_queue.go, send_message.go, …). Queue
// semantics — visibility, receipts, FIFO groups, dead letters, redrive —
// live in internal/broker; anything two front-ends need belongs there, not
// here.
//
// It must never keep queue state or decide queue semantics, and never call
// below the broker. Its only memory is protocol idempotency: the answers of
// FIFO receives by ReceiveRequestAttemptId, for 5 minutes
// (receive_attempts.go).
//
// With Config.Auth (a users file), every request must carry an AWS
// Signature Version 4 (Authorization header or presigned query string) by
// one of the file's access keys: sigv4.go parses and canonicalises it,
// auth.go verifies it and authorizes each action on its queue through the
// one table actionOps, before the action reaches the broker. A refused
// request must never reach the broker. AddPermission and RemovePermission
// then edit the file's rules (permission_rules.go). Without Config.Auth,
// signatures are parsed for the sender id only. Queue URLs are
// http://<advertised host>/<account>/<name> and ARNs
// arn:aws:sqs:<region>:<account>:<name>; the queue name is also read from the
// request path, so clients that post to the queue URL itself work.
package sqs
