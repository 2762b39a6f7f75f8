package sqs

import (
	"strconv"
	"testing"
)

// TestQueueNameCached: a QueueUrl answered from the cache names the queue
// a parse names, and a URL that names none is refused every time.
func TestQueueNameCached(t *testing.T) {
	c := &call{}
	for _, tc := range []struct{ url, want string }{
		{"http://localhost:9324/000000000000/orders", "orders"},
		{"http://h/000000000000/events%2Faudit", "events/audit"},
		{"https://sqs.us-east-1.amazonaws.com/1/q.fifo/", "q.fifo"},
	} {
		for range 2 { // parsed, then cached
			if got, err := c.queueName(tc.url); err != nil || got != tc.want {
				t.Fatalf("queueName(%q) = %q, %v; want %q", tc.url, got, err, tc.want)
			}
		}
	}
	for range 2 {
		if _, err := c.queueName("http://h/"); err == nil {
			t.Fatal("a URL without a queue was taken")
		}
		if _, err := c.queueName("http://[::1/x"); err == nil {
			t.Fatal("a malformed URL was taken")
		}
	}
}

// TestStringCacheBounded: past its bound the cache keeps nothing new.
func TestStringCacheBounded(t *testing.T) {
	var c stringCache
	for i := range maxCachedStrings + 5 {
		c.put(strconv.Itoa(i), "v")
	}
	if _, ok := c.get(strconv.Itoa(maxCachedStrings + 1)); ok {
		t.Fatal("an entry past the bound was kept")
	}
	if v, ok := c.get("0"); !ok || v != "v" {
		t.Fatal("an entry within the bound was lost")
	}
	c.put(string(make([]byte, maxCachedKeyLen+1)), "v")
	if n := len(*c.m.Load()); n != maxCachedStrings {
		t.Fatalf("%d entries", n)
	}
}
