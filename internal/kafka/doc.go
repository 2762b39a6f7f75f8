// Package kafka is sluice's Kafka wire-protocol front-end: it lets
// unmodified Kafka clients and tools (franz-go, Sarama, librdkafka and kcat,
// kafka-python) produce, consume and run consumer groups, classic and KIP-848
// (ConsumerGroupHeartbeat: the broker assigns), against the broker.
//
// # What it owns, and what it must never do
//
// It owns the TCP connections of the Kafka listener, the framing of Kafka
// requests and responses, and the translation between Kafka messages
// (decoded and encoded with franz-go's kmsg) and calls on *broker.Broker.
// It only translates: topics, batches, producer ids, offsets and groups live
// in the broker, and every broker error becomes a Kafka error code through
// one table (errors.go). It must never hold broker state of its own, change
// stored data except through the broker, or panic on any input.
//
// # Connection model
//
// Serve accepts connections; each connection has one goroutine that reads a
// size-prefixed request, decodes its header (v1, or v2 with tagged fields
// for flexible versions), dispatches it by API key to the handler in the
// file named after the key (00_produce.go … 61_describe_producers.go), and
// writes the response before reading the next request. Kafka requires
// responses in request order and a real broker also handles one request per
// connection at a time, so pipelining clients get exactly the ordering and
// per-connection sequencing (which idempotent producers rely on) they expect.
// Produce with acks=0 gets no response at all.
//
// Versions served are the one table in dispatch.go (docs/kafka.md lists
// it): up to what Kafka 4.2 serves, topic ids included. A topic id is
// derived from the topic's name and catalog id (topicID), and topic_ids.go
// caches the reverse lookup that Fetch v13+ needs on every request.
//
// Fetch responses are written by hand (fetch_write.go) so the record
// batches, stored exactly as producers sent them, go from the segment file
// to the socket with sendfile(2) instead of through user space.
//
// A malformed frame (size out of range, truncated header, unknown API key,
// unsupported version) closes the connection, as Kafka does; ApiVersions
// alone answers a too-new version with UNSUPPORTED_VERSION in v0 form so the
// client can retry lower. A panic in a handler is recovered, logged and
// closes only that connection.
//
// # Authentication and authorization
//
// With Config.Auth set, a connection authenticates with SASL (sasl.go,
// 17_sasl_handshake.go, 36_sasl_authenticate.go) or a verified TLS client
// certificate; until then only ApiVersions and the SASL requests are
// decoded, and any other request closes the connection before reaching a
// handler. Each handler then asks authz.go whether the principal may do
// what its API does, and answers Kafka's own *_AUTHORIZATION_FAILED codes.
// DescribeAcls, CreateAcls and DeleteAcls show and edit the users file's
// rules (acl_binding.go). The package must never let an unauthenticated
// request reach the broker, nor keep a credential.
//
// Shutdown stops accepting, cancels long-polls, lets each connection finish
// the request it is handling, then closes every connection; every goroutine
// the front-end starts is joined before Shutdown returns.
package kafka
