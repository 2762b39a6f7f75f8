package sqs

import (
	"encoding/xml"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
)

func init() { register("ReceiveMessage", handle(receiveMessage)) }

type receiveMessageInput struct {
	QueueURL                    string   `json:"QueueUrl"`
	AttributeNames              []string `json:"AttributeNames"`
	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
	MessageAttributeNames       []string `json:"MessageAttributeNames"`
	MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
	VisibilityTimeout           *int     `json:"VisibilityTimeout"`
	WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	ReceiveRequestAttemptID     string   `json:"ReceiveRequestAttemptId"`
}

func (in *receiveMessageInput) fromQuery(f form) (err error) {
	in.QueueURL = f.str("QueueUrl")
	in.AttributeNames = f.list("AttributeName")
	in.MessageSystemAttributeNames = f.list("MessageSystemAttributeName")
	in.MessageAttributeNames = f.list("MessageAttributeName")
	in.ReceiveRequestAttemptID = f.str("ReceiveRequestAttemptId")
	if in.MaxNumberOfMessages, err = f.intp("MaxNumberOfMessages"); err != nil {
		return err
	}
	if in.VisibilityTimeout, err = f.intp("VisibilityTimeout"); err != nil {
		return err
	}
	in.WaitTimeSeconds, err = f.intp("WaitTimeSeconds")
	return err
}

type message struct {
	XMLName                xml.Name `json:"-" xml:"Message"`
	MessageID              string   `json:"MessageId" xml:"MessageId"`
	ReceiptHandle          string   `json:"ReceiptHandle" xml:"ReceiptHandle"`
	MD5OfBody              string   `json:"MD5OfBody" xml:"MD5OfBody"`
	Body                   string   `json:"Body" xml:"Body"`
	Attributes             attrMap  `json:"Attributes,omitempty" xml:"Attribute"`
	MD5OfMessageAttributes string   `json:"MD5OfMessageAttributes,omitempty" xml:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      msgAttrs `json:"MessageAttributes,omitempty" xml:"MessageAttribute"`
}

type receiveMessageOutput struct {
	Messages []message `json:"Messages,omitempty"`
}

// maxReceiveMessages is SQS's limit per ReceiveMessage.
const maxReceiveMessages = 10

func receiveMessage(h *Handler, c *call, in *receiveMessageInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	opts, err := receiveOptions(in)
	if err != nil {
		return nil, err
	}
	sysNames := append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...)
	for _, n := range sysNames {
		if n != "All" && !slices.Contains(messageSystemAttrs, n) && !isQueueAttr(n) {
			return nil, unknownAttr(n)
		}
	}
	if _, _, ok := splitSub(name); ok {
		return h.receiveSubscription(c, name, opts, sysNames, in.MessageAttributeNames)
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	attemptID := ""
	if s.FIFO {
		attemptID = in.ReceiveRequestAttemptID
	}
	if attemptID != "" {
		if !fifoIDRE.MatchString(attemptID) {
			return nil, invalidValue("ReceiveRequestAttemptId", attemptID, "must be 1 to 128 letters, digits or punctuation")
		}
		visibility := opts.Visibility
		if visibility == 0 {
			visibility = s.VisibilityTimeout
		}
		if msgs, ok := h.replayAttempt(c.ctx, name, attemptID, visibility); ok {
			return receiveMessageOutput{Messages: msgs}, nil
		}
	}
	ds, err := h.b.Receive(c.ctx, name, opts)
	if err != nil && c.ctx.Err() != nil {
		// The client hung up during a long poll; nobody reads the answer.
		return receiveMessageOutput{}, nil
	}
	if err != nil {
		return nil, toAPIError(err)
	}
	out := receiveMessageOutput{}
	for _, d := range ds {
		m := h.message(d, s, sysNames, in.MessageAttributeNames)
		c.traceDelivered(d, &m, sysNames, in.MessageAttributeNames)
		out.Messages = append(out.Messages, m)
	}
	if attemptID != "" {
		h.rememberAttempt(name, attemptID, out.Messages)
	}
	return out, nil
}

// receiveOptions checks SQS's ranges. An explicit VisibilityTimeout of 0
// (hand the message straight back) becomes one nanosecond, because the
// broker reads zero as "the queue's timeout".
func receiveOptions(in *receiveMessageInput) (broker.ReceiveOptions, error) {
	opts := broker.ReceiveOptions{Max: 1, Wait: broker.WaitQueueDefault}
	if n := in.MaxNumberOfMessages; n != nil {
		if *n < 1 || *n > maxReceiveMessages {
			return opts, invalidValue("MaxNumberOfMessages", *n, "Must be between 1 and 10, if provided")
		}
		opts.Max = *n
	}
	if v := in.VisibilityTimeout; v != nil {
		if *v < 0 || *v > maxVisibilitySec {
			return opts, invalidValue("VisibilityTimeout", *v, "Must be >= 0 and <= 43200, if provided")
		}
		opts.Visibility = max(time.Duration(*v)*time.Second, time.Nanosecond)
	}
	if w := in.WaitTimeSeconds; w != nil {
		if *w < 0 || *w > maxWaitSec {
			return opts, invalidValue("WaitTimeSeconds", *w, "Must be >= 0 and <= 20, if provided")
		}
		opts.Wait = time.Duration(*w) * time.Second
	}
	return opts, nil
}

// messageSystemAttrs are the system attributes ReceiveMessage can return.
var messageSystemAttrs = []string{
	"SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
	"SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader", "DeadLetterQueueSourceArn",
}

// message renders a delivery with the requested attributes.
func (h *Handler) message(d broker.Delivery, s broker.QueueSettings, sysNames, attrNames []string) message {
	m := message{MessageID: d.ID, ReceiptHandle: d.Receipt, MD5OfBody: md5Hex(d.Body), Body: bytesString(d.Body)}
	if len(sysNames) > 0 {
		all := h.systemValues(d, s)
		m.Attributes = attrMap{}
		for n, v := range all {
			if slices.Contains(sysNames, "All") || slices.Contains(sysNames, n) {
				m.Attributes[n] = v
			}
		}
	}
	if len(d.Attributes) == 0 || len(attrNames) == 0 {
		return m // nothing to pick: no map made for every message received
	}
	picked := pickAttributes(d.Attributes, attrNames)
	if len(picked) > 0 {
		m.MessageAttributes = fromBroker(picked)
		m.MD5OfMessageAttributes = md5OfAttributes(picked)
	}
	return m
}

func (h *Handler) systemValues(d broker.Delivery, s broker.QueueSettings) map[string]string {
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	v := map[string]string{
		"SenderId":                         d.System[sysSenderID],
		"SentTimestamp":                    ms(d.SentAt),
		"ApproximateReceiveCount":          strconv.Itoa(d.ReceiveCount),
		"ApproximateFirstReceiveTimestamp": ms(d.FirstReceivedAt),
	}
	if v["SenderId"] == "" {
		v["SenderId"] = h.cfg.Account
	}
	if t := d.System[sysTraceHeader]; t != "" {
		v["AWSTraceHeader"] = t
	}
	if s.FIFO {
		v["SequenceNumber"] = sequenceNumber(d.Sequence)
		v["MessageGroupId"] = d.GroupID
		v["MessageDeduplicationId"] = d.DedupID
	} else if g := d.System[sysGroupID]; g != "" {
		v["MessageGroupId"] = g
	}
	// The broker keeps a message's dead-letter history through a redrive;
	// SQS names the source only while the message is in another queue.
	if d.DeadLetter != nil && d.DeadLetter.SourceQueue != "" && d.DeadLetter.SourceQueue != s.Name {
		v["DeadLetterQueueSourceArn"] = h.arn(d.DeadLetter.SourceQueue)
	}
	return v
}

// pickAttributes selects message attributes by MessageAttributeNames: "All"
// or ".*" for every one, "prefix.*" for those under a prefix, or exact names.
func pickAttributes(attrs map[string]broker.Attribute, names []string) map[string]broker.Attribute {
	out := map[string]broker.Attribute{}
	for name, a := range attrs {
		for _, want := range names {
			prefix, isPrefix := strings.CutSuffix(want, "*")
			if want == "All" || want == ".*" || want == name || (isPrefix && strings.HasPrefix(name, prefix)) {
				out[name] = a
				break
			}
		}
	}
	return out
}
