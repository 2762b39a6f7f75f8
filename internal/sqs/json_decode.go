package sqs

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A decoder without reflection for the JSON bodies of the hot actions
// (SendMessage, SendMessageBatch, ReceiveMessage, DeleteMessage,
// DeleteMessageBatch, ChangeMessageVisibility and its batch). encoding/json
// was the largest piece of the handler's own CPU under load (W2 over SQS,
// bench/compare/results/2026-12-02-sqs-profile/): it validates the body in
// one pass, decodes it in a second, and finds every field by reflection.
//
// The contract is one-sided: when a fastDecoder's decodeFast says true, the
// input holds exactly what decodeJSON (encoding/json) would have decoded
// from the same body, and decodeJSON would have accepted it. When it says
// false — a malformed body, a member of the wrong type, and anything rare
// it does not handle (an escaped member name, a number array for bytes,
// deep nesting) — the caller decodes the body again with decodeJSON into a
// fresh input, so every refusal, and its message, is encoding/json's.
// FuzzFastJSON holds the two to that.

// fastDecoder is an input with a decoder of its own for JSON bodies.
type fastDecoder interface {
	// decodeFast decodes body (trimmed of white space, not empty) or
	// reports false leaving the receiver as it was.
	decodeFast(body []byte) bool
}

// maxFastDepth bounds the nesting the fast decoder follows; deeper bodies
// go to encoding/json (whose own bound is 10,000).
const maxFastDepth = 64

// jdec is a position in a body being decoded.
type jdec struct {
	b []byte
	i int
}

func (d *jdec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, 0 at the end.
func (d *jdec) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// top decodes the body as one object through member, then allows what
// json.Decoder allows after the first value (decodeJSONStream): nothing,
// or a closing bracket and anything after it.
func (d *jdec) top(member func(key []byte) bool) bool {
	if !d.object(0, member) {
		return false
	}
	switch d.peek() {
	case 0:
		return d.i == len(d.b)
	case ']', '}':
		return true
	}
	return false
}

// object reads an object, calling member with each member's name (the raw
// bytes between the quotes) when the value is next; member must read the
// value. Names with escapes are left to encoding/json.
func (d *jdec) object(depth int, member func(key []byte) bool) bool {
	if depth >= maxFastDepth || d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		start := d.i
		esc, ok := d.str()
		if !ok || esc {
			return false
		}
		key := d.b[start+1 : d.i-1]
		if d.peek() != ':' {
			return false
		}
		d.i++
		d.ws()
		if !member(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem with each element's index when the
// element is next; elem must read it.
func (d *jdec) array(depth int, elem func(i int) bool) (n int, ok bool) {
	if depth >= maxFastDepth || d.peek() != '[' {
		return 0, false
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return 0, true
	}
	for {
		d.ws()
		if !elem(n) {
			return n, false
		}
		n++
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return n, true
		default:
			return n, false
		}
	}
}

// str reads a string token at d.i, checking it as encoding/json's scanner
// does (no control characters, only JSON's escapes), and says whether it
// has escapes. Invalid UTF-8 is allowed, as there.
func (d *jdec) str() (esc, ok bool) {
	d.i++ // the opening quote
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c >= 0x20 && c != '"' && c != '\\' {
			d.i++ // most of a body: one comparison chain a byte
			continue
		}
		switch {
		case c == '"':
			d.i++
			return esc, true
		case c < 0x20:
			return esc, false
		case c == '\\':
			esc = true
			if d.i+1 >= len(d.b) {
				return esc, false
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if getu4(d.b[d.i:]) < 0 {
					return esc, false
				}
				d.i += 6
			default:
				return esc, false
			}
		default:
			d.i++
		}
	}
	return esc, false
}

// literal reads true, false or null.
func (d *jdec) literal(word string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(word)) {
		return false
	}
	d.i += len(word)
	return true
}

// null reads a null if one is next.
func (d *jdec) null() bool {
	if d.i < len(d.b) && d.b[d.i] == 'n' {
		return d.literal("null")
	}
	return false
}

// number reads a number token (JSON's grammar) and returns it.
func (d *jdec) number() ([]byte, bool) {
	start := d.i
	b := d.b
	digits := func() bool {
		s := d.i
		for d.i < len(b) && b[d.i] >= '0' && b[d.i] <= '9' {
			d.i++
		}
		return d.i > s
	}
	if d.i < len(b) && b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(b) && b[d.i] == '0':
		d.i++
	case !digits():
		return nil, false
	}
	if d.i < len(b) && b[d.i] == '.' {
		d.i++
		if !digits() {
			return nil, false
		}
	}
	if d.i < len(b) && (b[d.i] == 'e' || b[d.i] == 'E') {
		d.i++
		if d.i < len(b) && (b[d.i] == '+' || b[d.i] == '-') {
			d.i++
		}
		if !digits() {
			return nil, false
		}
	}
	return b[start:d.i], true
}

// skip reads any value, for members no field takes.
func (d *jdec) skip(depth int) bool {
	switch c := d.peek(); {
	case c == '{':
		return d.object(depth+1, func([]byte) bool { return d.skip(depth + 1) })
	case c == '[':
		_, ok := d.array(depth+1, func(int) bool { return d.skip(depth + 1) })
		return ok
	case c == '"':
		_, ok := d.str()
		return ok
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, ok := d.number()
		return ok
	}
	return false
}

// rawString reads a string token and returns it decoded as encoding/json
// decodes a string (invalid UTF-8 and unpaired surrogates become U+FFFD).
func (d *jdec) rawString() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	start := d.i
	esc, ok := d.str()
	if !ok {
		return nil, false
	}
	in := d.b[start+1 : d.i-1]
	if !esc && utf8.Valid(in) {
		return in, true
	}
	return unquoteReplacing(in), true
}

// setString decodes a string member into s; null leaves s as it is.
func (d *jdec) setString(s *string) bool {
	if d.null() {
		return true
	}
	b, ok := d.rawString()
	if ok {
		*s = string(b)
	}
	return ok
}

// setText decodes a text member (text.go: invalid characters kept for
// checkChars); null is nil, as for any pointer.
func (d *jdec) setText(t **text) bool {
	if d.null() {
		*t = nil
		return true
	}
	if d.peek() != '"' {
		return false
	}
	start := d.i
	esc, ok := d.str()
	if !ok {
		return false
	}
	var s string
	if esc {
		var err error
		if s, err = unquoteKeepingInvalid(d.b[start:d.i]); err != nil {
			return false
		}
	} else {
		s = string(d.b[start+1 : d.i-1]) // what unquoteKeepingInvalid returns, without scanning it again
	}
	if *t == nil {
		*t = new(text)
	}
	**t = text(s)
	return true
}

// setInt decodes an integer member into *p (a new int if nil); null is
// nil. A fraction, an exponent or an int64 overflow is a type error in
// encoding/json, left to it.
func (d *jdec) setInt(p **int) bool {
	if d.null() {
		*p = nil
		return true
	}
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return false
	}
	raw, ok := d.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return false
	}
	if *p == nil {
		*p = new(int)
	}
	**p = int(n)
	return true
}

// setBytes decodes a base64 string member as encoding/json does ([]byte:
// standard encoding, line breaks ignored); null is nil.
func (d *jdec) setBytes(p *[]byte) bool {
	if d.null() {
		*p = nil
		return true
	}
	s, ok := d.rawString()
	if !ok {
		return false
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		return false
	}
	*p = b[:n]
	return true
}

// sliceInto decodes an array member into *s the way encoding/json does:
// element i decodes into what the slice already holds there (up to its
// capacity), the slice is cut to the array's length, and an empty array
// is an empty slice, not nil. A null member is nil.
func sliceInto[T any](d *jdec, depth int, s *[]T, elem func(*T) bool) bool {
	if d.null() {
		*s = nil
		return true
	}
	v := *s
	n, ok := d.array(depth, func(i int) bool {
		if i >= cap(v) {
			var zero T
			v = append(v[:i], zero)
		}
		if i >= len(v) {
			v = v[:i+1]
		}
		return elem(&v[i])
	})
	if !ok {
		return false
	}
	if n < len(v) {
		v = v[:n]
	}
	if n == 0 {
		v = []T{}
	}
	*s = v
	return true
}

// strings decodes an array of strings; a null element leaves what the
// slice held there, as encoding/json leaves a string.
func (d *jdec) strings(depth int, s *[]string) bool {
	return sliceInto(d, depth+1, s, d.setString)
}

// fieldOf finds a member's field as encoding/json does: an exact match,
// else one equal under Unicode case folding (bytes.EqualFold); -1 if none.
func fieldOf(key []byte, names []string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for i, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return i
		}
	}
	return -1
}

// getu4 decodes \uXXXX at the start of s, -1 if it is not one.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquoteReplacing decodes the inside of a string token already checked by
// str, as encoding/json's unquote does: escapes, surrogate pairs, and
// U+FFFD for invalid UTF-8 and unpaired surrogates.
func unquoteReplacing(s []byte) []byte {
	b := make([]byte, 0, len(s)+utf8.UTFMax)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != utf8.RuneError {
						b = utf8.AppendRune(b, dec)
						r += 6
						continue
					}
					rr = utf8.RuneError
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return b
}
