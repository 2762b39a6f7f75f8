package sqs

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/sluice-mq/sluice/internal/broker"
)

// A request a browser labels as sent by a page of another site is refused with
// AccessDenied in its own protocol, and changes nothing; SQS clients (no Origin, no
// Sec-Fetch-Site), a URL typed into the browser and a page of the endpoint's own
// origin are served. Without authentication, which is where it matters: the
// tester's form POST deleted a queue of a loopback broker.
func TestCrossSiteRefused(t *testing.T) {
	cases := []struct {
		name    string
		headers map[string]string
		refused bool
	}{
		{"the tester's form POST", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, true},
		{"Sec-Fetch-Site cross-site alone", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"Sec-Fetch-Site same-site (another port of localhost)", map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		{"Origin of another host, no Sec-Fetch-Site", map[string]string{"Origin": "https://evil.example"}, true},
		{"Origin of another port", map[string]string{"Origin": "http://sqs.test:3000"}, true},
		{"Origin null (sandboxed frame)", map[string]string{"Origin": "null"}, true},
		{"same-origin label, Origin of another host", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"}, true},
		{"SDK: neither header", nil, false},
		{"typed into the address bar", map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"a page of the endpoint's own origin", map[string]string{"Origin": "http://sqs.test", "Sec-Fetch-Site": "same-origin"}, false},
		{"Origin of the same host:port, no Sec-Fetch-Site", map[string]string{"Origin": "http://SQS.test"}, false},
	}
	for _, proto := range []string{"query", "query GET", "json"} {
		for _, c := range cases {
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet()})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				if _, err := b.CreateQueue(brokerQueue("victim")); err != nil {
					t.Fatal(err)
				}
				h := NewHandler(b, Config{Logger: quiet()}) // no Auth: authentication off
				queueURL := "http://sqs.test/000000000000/victim"
				for _, a := range []struct {
					action string
					params map[string]string
				}{
					{"SendMessage", map[string]string{"QueueUrl": queueURL, "MessageBody": "forged"}},
					{"DeleteQueue", map[string]string{"QueueUrl": queueURL}},
				} {
					r := crossSiteRequest(proto, a.action, a.params)
					for k, v := range c.headers {
						r.Header.Set(k, v)
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					jsonProto := proto == "json"
					switch {
					case c.refused && (rec.Code != http.StatusForbidden || errorCode(t, jsonProto, rec) != "AccessDenied"):
						t.Fatalf("%s: %d %s, want 403 AccessDenied", a.action, rec.Code, rec.Body)
					case !c.refused && rec.Code != http.StatusOK:
						t.Fatalf("%s: %d %s, want 200", a.action, rec.Code, rec.Body)
					}
					if a.action == "SendMessage" {
						st, err := b.QueueStats("victim")
						if err != nil {
							t.Fatal(err)
						}
						if want := map[bool]int64{true: 0, false: 1}[c.refused]; st.Visible != want {
							t.Fatalf("after SendMessage: %d visible, want %d", st.Visible, want)
						}
					}
				}
				if _, err := b.QueueStats("victim"); (err == nil) != c.refused {
					t.Fatalf("after DeleteQueue: the queue's stats answer %v (refused: %v)", err, c.refused)
				}
			})
		}
	}
}

// crossSiteRequest is an unsigned request of action in proto: the query protocol as
// a form POST or as a GET with the parameters in the URL (an <img> or a link), or JSON.
func crossSiteRequest(proto, action string, params map[string]string) *http.Request {
	if proto != "query GET" {
		return request(proto == "json", action, params)
	}
	v := url.Values{"Action": {action}}
	for k, p := range params {
		v.Set(k, p)
	}
	return httptest.NewRequest("GET", "http://sqs.test/?"+v.Encode(), nil)
}

// With authentication on, a verified signature is what authorizes a request, so a
// presigned URL works wherever it is opened from, a page of another site included
// (its owner handed it out; whoever holds it could paste it too). An unsigned request
// from another site is refused by authentication, as any unsigned request is.
func TestCrossSiteWithAuth(t *testing.T) {
	a := newAuthHarness(t)
	if _, err := a.b.CreateQueue(brokerQueue("orders")); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"Action": {"SendMessage"}, "QueueUrl": {"http://sqs.test/000000000000/orders"}, "MessageBody": {"presigned"},
		"X-Amz-Expires": {"300"}}
	r, _ := http.NewRequest("GET", "http://sqs.test/?"+q.Encode(), nil)
	presigned, _, err := signer().PresignHTTP(bg(), carol, r, unsignedPayload, "sqs", "us-east-1", a.clock())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		headers map[string]string
	}{
		{"typed", map[string]string{"Sec-Fetch-Site": "none"}},
		{"a link on another site", map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"an <img> on another site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://elsewhere.example"}},
	} {
		r := httptest.NewRequest("GET", presigned, nil)
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		if rec := a.serve(r); rec.Code != http.StatusOK {
			t.Errorf("presigned, %s: %d %s, want 200", c.name, rec.Code, rec.Body)
		}
	}
	for _, jsonProto := range []bool{false, true} {
		r := request(jsonProto, "PurgeQueue", map[string]string{"QueueUrl": "http://sqs.test/000000000000/orders"})
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.Header.Set("Origin", "https://evil.example")
		rec := a.serve(r)
		if code := errorCode(t, jsonProto, rec); rec.Code != http.StatusForbidden || code != "MissingAuthenticationToken" {
			t.Errorf("json=%v: unsigned cross-site PurgeQueue: %d %s, want 403 MissingAuthenticationToken", jsonProto, rec.Code, code)
		}
	}
	if st, _ := a.b.QueueStats("orders"); st.Visible != 3 {
		t.Fatalf("visible %d, want the 3 presigned sends", st.Visible)
	}
}
