package sqs

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// text is a JSON string field SQS restricts to its allowed characters: a
// message body, a String attribute's value. encoding/json would turn
// invalid UTF-8 and unpaired surrogate escapes ("\ud800") into U+FFFD,
// which SQS allows, so a body SQS refuses would be stored rewritten. text
// decodes the string itself and keeps such input visible to checkChars:
// invalid bytes stay as they are, and an unpaired surrogate becomes its
// three-byte (WTF-8) form, which is not valid UTF-8 either. Everything
// else decodes exactly as encoding/json decodes it.
type text string

var errNotJSONString = errors.New("not a JSON string")

// UnmarshalJSON decodes a JSON string token. null leaves t as it is, as
// encoding/json does for a string.
func (t *text) UnmarshalJSON(raw []byte) error {
	if string(raw) == "null" {
		return nil
	}
	s, err := unquoteKeepingInvalid(raw)
	if err != nil {
		return err
	}
	*t = text(s)
	return nil
}

// plainJSONString says whether the inside of a JSON string token holds no
// escape, quote or control character, so it decodes to itself.
func plainJSONString(in []byte) bool {
	for _, c := range in {
		if c == '\\' || c == '"' || c < 0x20 {
			return false
		}
	}
	return true
}

// unquoteKeepingInvalid decodes a JSON string token (quotes included).
func unquoteKeepingInvalid(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", errNotJSONString
	}
	in := raw[1 : len(raw)-1]
	if plainJSONString(in) {
		return string(in), nil // the common case (a message body): one copy, not two
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		switch {
		case c == '"' || c < 0x20:
			return "", errNotJSONString
		case c != '\\':
			out = append(out, c) // invalid UTF-8 bytes are kept
			i++
			continue
		}
		if i+1 >= len(in) {
			return "", errNotJSONString
		}
		esc := in[i+1]
		i += 2
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(in, i)
			if !ok {
				return "", errNotJSONString
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if lo, ok := lowSurrogate(in, i); ok && r < 0xDC00 {
					if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
						out = utf8.AppendRune(out, pair)
						i += 6
						continue
					}
				}
				out = appendWTF8(out, r) // unpaired: kept, and invalid
				continue
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", errNotJSONString
		}
	}
	return string(out), nil
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	return rune(v), err == nil
}

// lowSurrogate reads a "\uDC00"-"\uDFFF" escape at b[i:].
func lowSurrogate(b []byte, i int) (rune, bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	r, ok := hex4(b, i+2)
	return r, ok && r >= 0xDC00 && r <= 0xDFFF
}

// appendWTF8 appends a surrogate code point in the three-byte form UTF-8
// forbids, so checkChars finds it.
func appendWTF8(b []byte, r rune) []byte {
	return append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
}

// MarshalJSON encodes t as encoding/json encodes a string.
func (t text) MarshalJSON() ([]byte, error) { return json.Marshal(string(t)) }

// textp converts an optional query parameter.
func textp(s *string) *text {
	if s == nil {
		return nil
	}
	t := text(*s)
	return &t
}
