package broker

import (
	"errors"

	"github.com/sluice-mq/sluice/internal/producer"
)

// Errors of the streams half of the broker (topics, produce, fetch,
// idempotent producers, groups, subscriptions). Front-ends map them with
// errors.Is; the Kafka front-end maps each to the code named in its comment.
var (
	// ErrUnknownPartition: the topic exists but not the partition
	// (UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownPartition = errors.New("partition does not exist")
	// ErrOffsetOutOfRange: a fetch below the log start or past the high
	// watermark (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrCorruptBatch: a produced batch failed validation: magic, lengths,
	// CRC-32C, records (CORRUPT_MESSAGE).
	ErrCorruptBatch = errors.New("corrupt record batch")
	// ErrRecordTooLarge: a record or batch over the topic's maximum message
	// size (MESSAGE_TOO_LARGE).
	ErrRecordTooLarge = errors.New("record is larger than the topic's maximum message size")
	// ErrKeyRequired: a record without a key produced to a compacted topic,
	// whose cleaner keeps the latest record per key (INVALID_RECORD, as
	// Kafka answers it).
	ErrKeyRequired = errors.New("a compacted topic needs a key on every record")
	// ErrTransactionsUnsupported: a transactional or control batch was
	// produced; sluice has no transactions yet (UNSUPPORTED_FOR_MESSAGE_FORMAT
	// or TRANSACTIONAL_ID_AUTHORIZATION_FAILED as the front-end sees fit).
	ErrTransactionsUnsupported = errors.New("transactional batches are not supported")
	// Idempotent producers' errors (package producer): a sequence gap
	// (OUT_OF_ORDER_SEQUENCE_NUMBER), a fenced epoch (PRODUCER_FENCED, or
	// INVALID_PRODUCER_EPOCH for old clients), an id never allocated
	// (UNKNOWN_PRODUCER_ID).
	ErrOutOfOrderSequence   = producer.ErrOutOfOrderSequence
	ErrProducerFenced       = producer.ErrFenced
	ErrInvalidProducerEpoch = producer.ErrFenced // Kafka's older name
	ErrUnknownProducerID    = producer.ErrUnknownID
	// ErrSubscriptionNotFound: no such subscription on the topic.
	ErrSubscriptionNotFound = errors.New("subscription does not exist")
	// ErrSubscriptionExists: a subscription of that name already exists.
	ErrSubscriptionExists = errors.New("subscription already exists")
)
