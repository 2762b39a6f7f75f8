package sqs

import (
	"fmt"
	"regexp"
	"time"
	"unsafe"

	"github.com/sluice-mq/sluice/internal/broker"
)

func init() { register("SendMessage", handle(sendMessage)) }

// sendEntry is one message to send: SendMessage's input, or one entry of
// SendMessageBatch (which adds Id).
type sendEntry struct {
	ID                      string   `json:"Id"`
	MessageBody             *text    `json:"MessageBody"`
	DelaySeconds            *int     `json:"DelaySeconds"`
	MessageAttributes       msgAttrs `json:"MessageAttributes"`
	MessageSystemAttributes msgAttrs `json:"MessageSystemAttributes"`
	MessageDeduplicationID  string   `json:"MessageDeduplicationId"`
	MessageGroupID          string   `json:"MessageGroupId"`
}

func (e *sendEntry) fromForm(f form) (err error) {
	e.ID = f.str("Id")
	e.MessageBody = textp(f.strp("MessageBody"))
	e.MessageDeduplicationID = f.str("MessageDeduplicationId")
	e.MessageGroupID = f.str("MessageGroupId")
	if e.DelaySeconds, err = f.intp("DelaySeconds"); err != nil {
		return err
	}
	if e.MessageAttributes, err = msgAttrsFromForm(f, "MessageAttribute"); err != nil {
		return err
	}
	e.MessageSystemAttributes, err = msgAttrsFromForm(f, "MessageSystemAttribute")
	return err
}

type sendMessageInput struct {
	QueueURL string `json:"QueueUrl"`
	sendEntry
}

func (in *sendMessageInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	return in.sendEntry.fromForm(f)
}

// sendResult is SendMessage's output and a batch's successful entry.
type sendResult struct {
	ID                           string `json:"Id,omitempty" xml:"Id,omitempty"`
	MessageID                    string `json:"MessageId" xml:"MessageId"`
	MD5OfMessageBody             string `json:"MD5OfMessageBody" xml:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty" xml:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty" xml:"MD5OfMessageSystemAttributes,omitempty"`
	SequenceNumber               string `json:"SequenceNumber,omitempty" xml:"SequenceNumber,omitempty"`
}

func sendMessage(h *Handler, c *call, in *sendMessageInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	si, res, err := h.sendInput(c, s, in.sendEntry)
	if err != nil {
		return nil, err
	}
	out, err := h.b.Send(c.ctx, name, []broker.SendInput{si})
	if err != nil {
		return nil, toAPIError(err)
	}
	if out[0].Err != nil {
		return nil, toAPIError(out[0].Err)
	}
	return res.with(out[0], s.FIFO), nil
}

// with fills in what the broker assigned.
func (r sendResult) with(br broker.SendResult, fifo bool) sendResult {
	r.MessageID = br.ID
	if fifo && br.Sequence >= 0 {
		r.SequenceNumber = sequenceNumber(br.Sequence)
	}
	return r
}

// sequenceNumber renders a log offset as SQS's SequenceNumber: a decimal
// that only grows within a queue (SQS uses 20 or more digits).
func sequenceNumber(off int64) string { return fmt.Sprintf("%020d", off) }

// Group and deduplication ids: 1 to 128 characters, letters, digits and
// punctuation.
var fifoIDRE = regexp.MustCompile("^[A-Za-z0-9!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]{1,128}$")

// sendInput checks one message against SQS's rules and the queue's type and
// builds the broker input and the digests the answer carries.
func (h *Handler) sendInput(c *call, s broker.QueueSettings, e sendEntry) (broker.SendInput, sendResult, error) {
	var none broker.SendInput
	if e.MessageBody == nil || *e.MessageBody == "" {
		return none, sendResult{}, missing("MessageBody")
	}
	body := string(*e.MessageBody)
	if err := checkChars(body); err != nil {
		return none, sendResult{}, newError(errInvalidContents, "Invalid message body: %v. The allowed characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF.", err)
	}
	attrs, err := e.MessageAttributes.toBroker()
	if err != nil {
		return none, sendResult{}, err
	}
	sys, err := systemAttributes(e.MessageSystemAttributes)
	if err != nil {
		return none, sendResult{}, err
	}
	in := broker.SendInput{Body: stringBytes(body), Attributes: attrs, System: map[string]string{sysSenderID: c.senderID}}
	for k, v := range sys {
		in.System[k] = string(v.Value)
	}
	if err := setDelay(&in, e.DelaySeconds, s.FIFO); err != nil {
		return none, sendResult{}, err
	}
	if err := setFIFO(&in, e, s); err != nil {
		return none, sendResult{}, err
	}
	c.traceSend(&in)
	res := sendResult{ID: e.ID, MD5OfMessageBody: md5Hex(in.Body),
		MD5OfMessageAttributes: md5OfAttributes(attrs), MD5OfMessageSystemAttributes: md5OfAttributes(sys)}
	return in, res, nil
}

// stringBytes is s's bytes without a copy. A message body is read-only
// from here on: the broker stores, caches and delivers Body and never
// writes into it, so the string's bytes can be the message's; []byte(s)
// copied every body once more (1 KiB a message in W2, a fifth of the
// handler's bytes).
func stringBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// bytesString is b as a string without a copy, for a delivered body: the
// broker never writes into a message's Body (stringBytes), so the string
// stays what was received, and the answer copies it once, into itself.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// setDelay applies DelaySeconds: absent means the queue's default, 0 means
// none. SQS caps it at 900 s even though the broker allows more, and FIFO
// queues take only the queue's delay.
func setDelay(in *broker.SendInput, delay *int, fifo bool) error {
	if delay == nil {
		return nil
	}
	if *delay < 0 || *delay > maxDelaySec {
		return invalidValue("DelaySeconds", *delay, "must be between 0 and 900, if provided")
	}
	if fifo && *delay > 0 {
		return invalidValue("DelaySeconds", *delay, "The request include parameter that is not valid for this queue type")
	}
	in.Delay = time.Duration(*delay) * time.Second
	in.NoDelay = *delay == 0
	return nil
}

// setFIFO applies the group and deduplication ids. A standard queue takes a
// group id (SQS fair queues) and keeps it only to report it back; a
// deduplication id there is an error, as in SQS.
func setFIFO(in *broker.SendInput, e sendEntry, s broker.QueueSettings) error {
	for param, v := range map[string]string{"MessageGroupId": e.MessageGroupID, "MessageDeduplicationId": e.MessageDeduplicationID} {
		if v != "" && !fifoIDRE.MatchString(v) {
			return invalidValue(param, v, "must be 1 to 128 letters, digits or punctuation")
		}
	}
	if !s.FIFO {
		if e.MessageDeduplicationID != "" {
			return invalidValue("MessageDeduplicationId", e.MessageDeduplicationID, "The request include parameter that is not valid for this queue type")
		}
		if e.MessageGroupID != "" {
			in.System[sysGroupID] = e.MessageGroupID
		}
		return nil
	}
	if e.MessageGroupID == "" {
		return missing("MessageGroupId")
	}
	if e.MessageDeduplicationID == "" && !s.ContentBasedDedup {
		return newError(errInvalidParameter, "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
	}
	in.GroupID, in.DedupID = e.MessageGroupID, e.MessageDeduplicationID
	return nil
}

// System attributes sluice keeps in broker.Message.System.
const (
	sysTraceHeader = "AWSTraceHeader"
	sysSenderID    = "SenderId"
	sysGroupID     = "MessageGroupId" // standard queues only; FIFO ones use Message.GroupID
)

// systemAttributes checks MessageSystemAttributes: SQS accepts only
// AWSTraceHeader, a String.
func systemAttributes(m msgAttrs) (map[string]broker.Attribute, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := map[string]broker.Attribute{}
	for name, a := range m {
		if name != sysTraceHeader {
			return nil, newError(errInvalidParameter, "Message system attribute name '%s' is invalid.", name)
		}
		if a.DataType != "String" || a.StringValue == nil || *a.StringValue == "" {
			return nil, newError(errInvalidParameter, "Message system attribute '%s' must be a non-empty String.", name)
		}
		if err := checkChars(string(*a.StringValue)); err != nil {
			return nil, newError(errInvalidParameter, "Message system attribute '%s' contains an invalid character: %v.", name, err)
		}
		out[name] = broker.Attribute{DataType: "String", Value: []byte(*a.StringValue)}
	}
	return out, nil
}
