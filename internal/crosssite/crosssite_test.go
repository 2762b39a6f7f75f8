package crosssite

import (
	"net/http/httptest"
	"testing"
)

// TestWhy: what a browser says of a page of another site is named; what clients send (no
// such header), a typed URL and the same origin are not.
func TestWhy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string]string
		cross   bool
	}{
		{"a client: neither header", nil, false},
		{"typed into the address bar", map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:9324"}, false},
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"same-site: another port of localhost", map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		{"another origin, no Sec-Fetch-Site", map[string]string{"Origin": "https://evil.example"}, true},
		{"another port", map[string]string{"Origin": "http://127.0.0.1:8080"}, true},
		{"null origin", map[string]string{"Origin": "null"}, true},
		{"origin with other case", map[string]string{"Origin": "http://LOCALHOST:9324"}, false},
	} {
		r := httptest.NewRequest("POST", "http://127.0.0.1:9324/", nil)
		if tc.name == "origin with other case" {
			r.Host = "localhost:9324"
		}
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		if got := Why(r) != ""; got != tc.cross {
			t.Errorf("%s: Why = %q, want cross-site %v", tc.name, Why(r), tc.cross)
		}
	}
}
