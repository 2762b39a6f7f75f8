package client

import sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"

// The schema's messages, under the names Go code of this package uses. They
// are aliases, so values pass to and from sluicev1 unchanged; the .proto
// comments document every field.
type (
	Queue            = sluicev1.Queue
	QueueConfig      = sluicev1.QueueConfig
	QueueStats       = sluicev1.QueueStats
	DeadLetterPolicy = sluicev1.DeadLetterPolicy
	Message          = sluicev1.Message
	SendEntry        = sluicev1.SendEntry
	SendResult       = sluicev1.SendResult
	AttributeValue   = sluicev1.AttributeValue

	Redrive             = sluicev1.Redrive
	RedriveFilter       = sluicev1.RedriveFilter
	StartRedriveRequest = sluicev1.StartRedriveRequest

	PeekedMessage           = sluicev1.PeekedMessage
	PeekResponse            = sluicev1.PeekResponse
	PreviewRedriveRequest   = sluicev1.PreviewRedriveRequest
	PreviewRedriveResponse  = sluicev1.PreviewRedriveResponse
	RedriveDestinationCount = sluicev1.RedriveDestinationCount

	Topic                 = sluicev1.Topic
	TopicConfig           = sluicev1.TopicConfig
	ProduceRecord         = sluicev1.ProduceRecord
	ProduceResult         = sluicev1.ProduceResult
	Idempotence           = sluicev1.Idempotence
	Record                = sluicev1.Record
	Header                = sluicev1.Header
	FetchRequest          = sluicev1.FetchRequest
	FetchResponse         = sluicev1.FetchResponse
	PartitionRecords      = sluicev1.PartitionRecords
	PartitionOffset       = sluicev1.PartitionOffset
	ListOffsetsRequest    = sluicev1.ListOffsetsRequest
	Subscription          = sluicev1.Subscription
	SubscriptionConfig    = sluicev1.SubscriptionConfig
	JoinGroupRequest      = sluicev1.JoinGroupRequest
	JoinGroupResponse     = sluicev1.JoinGroupResponse
	CommittedOffset       = sluicev1.CommittedOffset
	TopicPartitions       = sluicev1.TopicPartitions
	GroupSummary          = sluicev1.GroupSummary
	DescribeGroupResponse = sluicev1.DescribeGroupResponse
	ResetOffsetsRequest   = sluicev1.ResetOffsetsRequest
	PartitionOffsetResult = sluicev1.PartitionOffsetResult
)
