package sqs

import (
	"bytes"
	"encoding/xml"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// The query protocol: parameters form-encoded in the body (or the URL), lists
// and maps flattened as Name.N and Name.N.Member, answers in XML.

const xmlNamespace = "http://queue.amazonaws.com/doc/2012-11-05/"

// form is a query request's parameters.
type form url.Values

// parseForm merges the URL's parameters with a form-encoded body's.
func parseForm(r *http.Request, body []byte) (form, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, newError(errMalformedQuery, "malformed query string: %v", err)
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if len(body) > 0 && (ct == "application/x-www-form-urlencoded" || ct == "") {
		bv, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, newError(errMalformedQuery, "malformed form body: %v", err)
		}
		for k, vs := range bv {
			v[k] = append(v[k], vs...)
		}
	}
	return form(v), nil
}

func (f form) str(key string) string { return url.Values(f).Get(key) }

func (f form) has(key string) bool { _, ok := f[key]; return ok }

// strp is nil for a parameter that is absent.
func (f form) strp(key string) *string {
	if !f.has(key) {
		return nil
	}
	s := f.str(key)
	return &s
}

// intp parses an optional integer parameter.
func (f form) intp(key string) (*int, error) {
	if !f.has(key) {
		return nil, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(f.str(key)))
	if err != nil {
		return nil, invalidValue(key, f.str(key), "must be an integer")
	}
	return &n, nil
}

// indexed returns, in index order, the parameters named prefix.N or
// prefix.N.rest, grouped by N; each group maps rest ("" for prefix.N) to
// its value.
func (f form) indexed(prefix string) []form {
	groups := map[int]form{}
	for k, vs := range f {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(vs) == 0 {
			continue
		}
		num, member, _ := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 {
			continue
		}
		if groups[n] == nil {
			groups[n] = form{}
		}
		groups[n][member] = vs[:1]
	}
	keys := make([]int, 0, len(groups))
	for n := range groups {
		keys = append(keys, n)
	}
	sort.Ints(keys)
	out := make([]form, len(keys))
	for i, n := range keys {
		out[i] = groups[n]
	}
	return out
}

// list reads a flattened list: prefix.1, prefix.2, …
func (f form) list(prefix string) []string {
	var out []string
	for _, g := range f.indexed(prefix) {
		if g.has("") {
			out = append(out, g.str(""))
		}
	}
	return out
}

// pairs reads a flattened map: prefix.N.<key> and prefix.N.<value>.
func (f form) pairs(prefix, key, value string) map[string]string {
	gs := f.indexed(prefix)
	if len(gs) == 0 {
		return nil
	}
	out := make(map[string]string, len(gs))
	for _, g := range gs {
		out[g.str(key)] = g.str(value)
	}
	return out
}

// writeXML answers <Action>Response with its Result and ResponseMetadata.
func writeXML(w http.ResponseWriter, c *call, out any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Local: c.action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: xmlNamespace}}}
	err := enc.EncodeToken(start)
	if err == nil && out != nil {
		err = enc.EncodeElement(out, xml.StartElement{Name: xml.Name{Local: c.action + "Result"}})
	}
	if err == nil {
		err = enc.EncodeElement(responseMetadata{RequestID: c.requestID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}})
	}
	if err == nil {
		err = enc.EncodeToken(start.End())
	}
	if err == nil {
		err = enc.Flush()
	}
	if err != nil {
		writeXMLError(w, c, newError(errInternal, "encoding the response failed: %v", err))
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("x-amzn-RequestId", c.requestID)
	writeBody(w, http.StatusOK, buf.Bytes())
}

type responseMetadata struct {
	RequestID string `xml:"RequestId"`
}

type xmlErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	Detail    string   `xml:"Error>Detail"`
	RequestID string   `xml:"RequestId"`
}

func writeXMLError(w http.ResponseWriter, c *call, e *apiError) {
	buf, _ := xml.Marshal(xmlErrorResponse{Xmlns: xmlNamespace, Type: e.kind.faultType(),
		Code: e.kind.code, Message: e.message, RequestID: c.requestID})
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("x-amzn-RequestId", c.requestID)
	writeBody(w, e.kind.status, append([]byte(xml.Header), buf...))
}
