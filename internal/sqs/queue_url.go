package sqs

import (
	"net/url"
	"strings"
)

// queueURL is the URL clients address a queue by.
func (h *Handler) queueURL(c *call, name string) string {
	return c.baseURL + "/" + h.cfg.Account + "/" + url.PathEscape(name) // a subscription's "/" as %2F
}

// arn is a queue's Amazon resource name.
func (h *Handler) arn(name string) string {
	return "arn:aws:sqs:" + h.cfg.Region + ":" + h.cfg.Account + ":" + name
}

// queueFromARN is the queue an SQS ARN names. Region and account are not
// checked: one sluice is one account, and clients built for another region
// still mean this broker's queue.
func queueFromARN(arn string) (string, bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", false
	}
	return parts[5], true
}

// queueFromPath is the queue name of a request posted to a queue URL
// (/<account>/<name>), which the query protocol allows instead of a QueueUrl
// parameter.
func queueFromPath(p string) string {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	if len(segs) < 2 {
		return ""
	}
	return unescapeSegment(segs[len(segs)-1])
}

// unescapeSegment decodes one escaped path segment ("events%2Faudit" is
// the subscription events/audit); a malformed escape is kept as is, and
// then names no queue.
func unescapeSegment(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// queueName resolves a request's queue: the QueueUrl parameter (a URL, or a
// bare name as some local tools send), else the request path. The host and
// account in the URL are not checked, so URLs built for localhost,
// 127.0.0.1 or a container name all reach the queue.
func (c *call) queueName(queueURL string) (string, error) {
	if queueURL == "" {
		if c.pathQueue != "" {
			return c.pathQueue, nil
		}
		return "", missing("QueueUrl")
	}
	name := queueURL
	if strings.Contains(queueURL, "/") {
		u, err := url.Parse(queueURL)
		if err != nil {
			return "", newError(errInvalidAddress, "The address %s is not valid for this endpoint.", queueURL)
		}
		segs := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
		name = unescapeSegment(segs[len(segs)-1])
	}
	if name == "" {
		return "", newError(errInvalidAddress, "The address %s is not valid for this endpoint.", queueURL)
	}
	return name, nil
}
