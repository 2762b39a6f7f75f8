package sqs

import (
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// queueURL is the URL clients address a queue by.
func (h *Handler) queueURL(c *call, name string) string {
	return h.base(c) + "/" + h.cfg.Account + "/" + url.PathEscape(name) // a subscription's "/" as %2F
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
		if n, ok := queueURLNames.get(queueURL); ok {
			return n, nil
		}
		u, err := url.Parse(queueURL)
		if err != nil {
			return "", newError(errInvalidAddress, "The address %s is not valid for this endpoint.", queueURL)
		}
		segs := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
		name = unescapeSegment(segs[len(segs)-1])
		if name != "" {
			queueURLNames.put(queueURL, name)
		}
	}
	if name == "" {
		return "", newError(errInvalidAddress, "The address %s is not valid for this endpoint.", queueURL)
	}
	return name, nil
}

// queueURLNames remembers the queue name of each QueueUrl parsed: a client
// sends the same few URLs with every request, and url.Parse, the split and
// the unescape were 1.6 % of the server's CPU and four allocations a
// request under W2 over SQS. A name depends on nothing but its URL, so
// the answer is the same as parsing again; only names found are kept.
var queueURLNames stringCache

// stringCache maps strings to strings, up to maxCachedStrings entries of
// keys up to maxCachedKeyLen bytes; past that, put keeps nothing, so
// clients sending endless new URLs cost a parse each, as before, and no
// memory. The map is replaced, never changed: a get takes no lock.
type stringCache struct {
	mu sync.Mutex // serialises the copies
	m  atomic.Pointer[map[string]string]
}

const (
	maxCachedStrings = 1024
	maxCachedKeyLen  = 512
)

func (c *stringCache) get(k string) (string, bool) {
	m := c.m.Load()
	if m == nil {
		return "", false
	}
	v, ok := (*m)[k]
	return v, ok
}

func (c *stringCache) put(k, v string) {
	if len(k) > maxCachedKeyLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	var n int
	if old != nil {
		if _, ok := (*old)[k]; ok {
			return
		}
		n = len(*old)
	}
	if n >= maxCachedStrings {
		return
	}
	m := make(map[string]string, n+1)
	if old != nil {
		for ok, ov := range *old {
			m[ok] = ov
		}
	}
	m[k] = v
	c.m.Store(&m)
}
