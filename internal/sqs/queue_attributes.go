package sqs

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
)

// Queue attributes: AWS's names, ranges and defaults, mapped onto
// broker.QueueSettings. Attributes the broker has no field for (policies,
// encryption, FIFO throughput) are stored in QueueSettings.Extra under
// "sqs.attr.<Name>" and returned as given; sluice does not act on them.

// Ranges SQS enforces (seconds, bytes).
const (
	maxVisibilitySec   = 43200
	minRetentionSec    = 60
	maxRetentionSec    = 1209600
	maxDelaySec        = 900
	maxWaitSec         = 20
	minMessageSize     = 1024
	maxMessageSize     = 1048576
	maxMaxReceiveCount = 1000
)

const extraAttrPrefix = "sqs.attr."

// storedAttrs are kept in Extra and validated by their check function.
var storedAttrs = map[string]func(v string) bool{
	"Policy":                       isJSONOrEmpty,
	"RedriveAllowPolicy":           validRedriveAllow,
	"KmsMasterKeyId":               func(string) bool { return true },
	"KmsDataKeyReusePeriodSeconds": func(v string) bool { return inRange(v, 60, 86400) },
	"SqsManagedSseEnabled":         isBool,
	"FifoThroughputLimit":          func(v string) bool { return v == "perQueue" || v == "perMessageGroupId" },
}

// fifoOnly attributes are unknown on a standard queue, as in SQS.
var fifoOnly = map[string]bool{"ContentBasedDeduplication": true, "DeduplicationScope": true, "FifoThroughputLimit": true}

func unknownAttr(name string) *apiError {
	return newError(errInvalidAttrName, "Unknown Attribute %s.", name)
}

func badAttrValue(name string) *apiError {
	return newError(errInvalidAttrValue, "Invalid value for the parameter %s.", name)
}

// applyAttributes sets attrs on s. creating allows FifoQueue.
func (h *Handler) applyAttributes(s *broker.QueueSettings, attrs map[string]string, creating bool) error {
	if v, ok := attrs["FifoQueue"]; ok {
		if !isBool(v) {
			return badAttrValue("FifoQueue")
		}
		fifo := strings.EqualFold(v, "true")
		if !creating && fifo != s.FIFO {
			return unknownAttr("FifoQueue")
		}
		s.FIFO = fifo
	}
	for _, name := range sortedKeys(attrs) {
		if err := h.applyAttribute(s, name, attrs[name]); err != nil {
			return err
		}
	}
	// As in SQS: a throughput quota per message group needs deduplication
	// per message group (sluice enforces no quota; the pair is what
	// high-throughput FIFO means).
	if s.Extra[extraAttrPrefix+"FifoThroughputLimit"] == "perMessageGroupId" && s.DedupScope != broker.DedupScopeGroup {
		return newError(errInvalidAttrValue, "Invalid value for the parameter FifoThroughputLimit. "+
			"The perMessageGroupId value is allowed only when the value for DeduplicationScope is messageGroup.")
	}
	if _, ok := attrs["MessageRetentionPeriod"]; ok || creating {
		// SQS bounds a message's total visibility by 12 h; the broker
		// also needs that bound within the retention period, and does
		// not lower its 12 h default for a shorter retention itself.
		retention := s.Retention
		if retention == 0 {
			retention = broker.DefaultRetention
		}
		s.MaxExtension = min(broker.DefaultMaxExtension, retention)
	}
	return nil
}

func (h *Handler) applyAttribute(s *broker.QueueSettings, name, v string) error {
	if fifoOnly[name] && !s.FIFO {
		return unknownAttr(name)
	}
	if check, ok := storedAttrs[name]; ok {
		if !check(v) {
			return badAttrValue(name)
		}
		if s.Extra == nil {
			s.Extra = map[string]string{}
		}
		s.Extra[extraAttrPrefix+name] = v
		return nil
	}
	seconds := func(lo, hi int, dst *time.Duration) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return badAttrValue(name)
		}
		*dst = time.Duration(n) * time.Second
		return nil
	}
	switch name {
	case "FifoQueue":
		return nil // applied first
	case "VisibilityTimeout":
		if err := seconds(0, maxVisibilitySec, &s.VisibilityTimeout); err != nil {
			return err
		}
		if s.VisibilityTimeout == 0 {
			// The broker reads a zero visibility as "the default"; one
			// nanosecond is as good as zero to every client.
			s.VisibilityTimeout = time.Nanosecond
		}
		return nil
	case "MessageRetentionPeriod":
		return seconds(minRetentionSec, maxRetentionSec, &s.Retention)
	case "DelaySeconds":
		return seconds(0, maxDelaySec, &s.DefaultDelay)
	case "ReceiveMessageWaitTimeSeconds":
		return seconds(0, maxWaitSec, &s.ReceiveWait)
	case "MaximumMessageSize":
		n, err := strconv.Atoi(v)
		if err != nil || n < minMessageSize || n > maxMessageSize {
			return badAttrValue(name)
		}
		s.MaxMessageBytes = n
		return nil
	case "DeduplicationScope":
		if v != broker.DedupScopeQueue && v != broker.DedupScopeGroup {
			return badAttrValue(name)
		}
		s.DedupScope = v
		delete(s.Extra, extraAttrPrefix+name) // kept there before the broker deduplicated by it
		return nil
	case "ContentBasedDeduplication":
		if !isBool(v) {
			return badAttrValue(name)
		}
		s.ContentBasedDedup = strings.EqualFold(v, "true")
		return nil
	case "RedrivePolicy":
		return h.applyRedrivePolicy(s, v)
	}
	return unknownAttr(name)
}

// applyRedrivePolicy parses {"deadLetterTargetArn": …, "maxReceiveCount": …};
// an empty value removes the policy. maxReceiveCount may be a number or a
// numeric string: the console and CLI examples use both.
func (h *Handler) applyRedrivePolicy(s *broker.QueueSettings, v string) error {
	if v == "" {
		s.MaxReceives, s.DeadLetterQueue = 0, ""
		return nil
	}
	var p struct {
		Target string          `json:"deadLetterTargetArn"`
		Count  json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return invalidValue("RedrivePolicy", v, "Redrive policy is not a valid JSON map")
	}
	n, err := strconv.Atoi(strings.Trim(string(p.Count), `"`))
	if err != nil || n < 1 || n > maxMaxReceiveCount {
		return invalidValue("RedrivePolicy", v, "Invalid value for maxReceiveCount: must be an integer from 1 to 1000")
	}
	dlq, ok := queueFromARN(p.Target)
	if !ok {
		return invalidValue("RedrivePolicy", v, "Invalid value for deadLetterTargetArn")
	}
	target, err := h.b.GetQueue(dlq)
	if err != nil {
		return invalidValue("RedrivePolicy", v, "Dead letter target does not exist")
	}
	if target.FIFO != s.FIFO {
		return invalidValue("RedrivePolicy", v, "Dead-letter target queue must be of the same type as the source queue")
	}
	s.MaxReceives, s.DeadLetterQueue = n, dlq
	return nil
}

// allQueueAttrs is every attribute GetQueueAttributes "All" reports, in
// the order AWS documents them.
var allQueueAttrs = []string{
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
	"CreatedTimestamp", "DelaySeconds", "LastModifiedTimestamp", "MaximumMessageSize", "MessageRetentionPeriod",
	"Policy", "QueueArn", "ReceiveMessageWaitTimeSeconds", "RedrivePolicy", "RedriveAllowPolicy", "VisibilityTimeout",
	"KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled",
	"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit",
}

// queueAttributes reports the named attributes ("All" for every one). An
// attribute that does not apply (FIFO ones on a standard queue, a policy
// never set) is left out, as SQS does.
func (h *Handler) queueAttributes(s broker.QueueSettings, st broker.QueueStats, names []string) (attrMap, error) {
	want := map[string]bool{}
	for _, n := range names {
		if n == "All" {
			for _, a := range allQueueAttrs {
				want[a] = true
			}
			continue
		}
		if !isQueueAttr(n) {
			return nil, unknownAttr(n)
		}
		want[n] = true
	}
	all := h.attributeValues(s, st)
	out := attrMap{}
	for n := range want {
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	return out, nil
}

func isQueueAttr(n string) bool {
	for _, a := range allQueueAttrs {
		if a == n {
			return true
		}
	}
	return false
}

func (h *Handler) attributeValues(s broker.QueueSettings, st broker.QueueStats) map[string]string {
	sec := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }
	m := map[string]string{
		"ApproximateNumberOfMessages":           strconv.FormatInt(st.Visible, 10),
		"ApproximateNumberOfMessagesNotVisible": strconv.FormatInt(st.InFlight, 10),
		"ApproximateNumberOfMessagesDelayed":    strconv.FormatInt(st.Delayed, 10),
		"CreatedTimestamp":                      strconv.FormatInt(s.CreatedAt.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(s.ModifiedAt.Unix(), 10),
		"DelaySeconds":                          sec(s.DefaultDelay),
		"MaximumMessageSize":                    strconv.Itoa(s.MaxMessageBytes),
		"MessageRetentionPeriod":                sec(s.Retention),
		"QueueArn":                              h.arn(s.Name),
		"ReceiveMessageWaitTimeSeconds":         sec(s.ReceiveWait),
		"VisibilityTimeout":                     sec(s.VisibilityTimeout),
		"SqsManagedSseEnabled":                  "false",
	}
	if s.FIFO {
		m["FifoQueue"] = "true"
		m["ContentBasedDeduplication"] = strconv.FormatBool(s.ContentBasedDedup)
		m["DeduplicationScope"] = broker.DedupScopeQueue
		if s.DedupScope != "" {
			m["DeduplicationScope"] = s.DedupScope
		}
		m["FifoThroughputLimit"] = "perQueue"
	}
	if s.MaxReceives > 0 {
		p, _ := json.Marshal(struct {
			Target string `json:"deadLetterTargetArn"`
			Count  int    `json:"maxReceiveCount"`
		}{h.arn(s.DeadLetterQueue), s.MaxReceives})
		m["RedrivePolicy"] = string(p)
	}
	for k, v := range s.Extra {
		if name, ok := strings.CutPrefix(k, extraAttrPrefix); ok && name != "DeduplicationScope" {
			m[name] = v // a DeduplicationScope here predates the broker's own setting
		}
	}
	return m
}

func isBool(v string) bool { return strings.EqualFold(v, "true") || strings.EqualFold(v, "false") }

func inRange(v string, lo, hi int) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= lo && n <= hi
}

func isJSONOrEmpty(v string) bool { return v == "" || json.Valid([]byte(v)) }

// validRedriveAllow checks {"redrivePermission": allowAll|denyAll|byQueue,
// "sourceQueueArns": [...]}; byQueue needs 1 to 10 ARNs.
func validRedriveAllow(v string) bool {
	if v == "" {
		return true
	}
	var p struct {
		Permission string   `json:"redrivePermission"`
		Sources    []string `json:"sourceQueueArns"`
	}
	if json.Unmarshal([]byte(v), &p) != nil {
		return false
	}
	switch p.Permission {
	case "allowAll", "denyAll":
		return len(p.Sources) == 0
	case "byQueue":
		return len(p.Sources) >= 1 && len(p.Sources) <= 10
	}
	return false
}
