package sqs

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// text decodes every valid JSON string as encoding/json does, and keeps
// what encoding/json would rewrite to U+FFFD as invalid UTF-8, so that
// checkChars refuses it.
func TestTextDecoding(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		valid bool // the result is text SQS allows
	}{
		{`"plain"`, true},
		{`"esc \" \\ \/ \b\f\n\r\t \u00e9 \u4e2d"`, false}, // \b and \f are outside SQS's set
		{`"tab\tnewline\ncr\r"`, true},
		{`"pair \ud83d\ude00"`, true},
		{"\"raw \xf0\x9f\x98\x80 utf-8\"", true},
		{`"lone high \ud800"`, false},
		{`"lone low \udc00"`, false},
		{`"high then not low \ud800\u0041"`, false},
		{`"reversed \udc00\ud800"`, false},
		{"\"bad byte \xff\"", false},
		{"\"truncated \xe4\xb8\"", false},
		{`"nul \u0000"`, false},
		{`"U+FFFD \ufffd is allowed"`, true},
		{`"U+FFFE \ufffe is not"`, false},
	} {
		var got text
		if err := json.Unmarshal([]byte(tc.raw), &got); err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if err := checkChars(string(got)); (err == nil) != tc.valid {
			t.Errorf("%s: checkChars = %v, want valid %v", tc.raw, err, tc.valid)
		}
		var std string
		if err := json.Unmarshal([]byte(tc.raw), &std); err != nil {
			t.Fatalf("%s: encoding/json: %v", tc.raw, err)
		}
		if utf8.ValidString(string(got)) && string(got) != std {
			t.Errorf("%s: %q, encoding/json gives %q", tc.raw, got, std)
		}
	}
	for _, raw := range []string{`"unterminated`, `"bad \x escape"`, `"\u12"`, "\"ctl \x01\"", `12`} {
		var got text
		if err := json.Unmarshal([]byte(raw), &got); err == nil {
			t.Errorf("%s: accepted as %q", raw, got)
		}
	}
	// null leaves a *text unset, as for a *string.
	var in struct{ B *text }
	if err := json.Unmarshal([]byte(`{"B":null}`), &in); err != nil || in.B != nil {
		t.Errorf("null: %v %v", in.B, err)
	}
}

// FuzzTextUnmarshal: text agrees with encoding/json on which tokens are
// strings, decodes valid text the same, and where it keeps invalid UTF-8,
// encoding/json would have substituted U+FFFD.
func FuzzTextUnmarshal(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `"\\u"`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var std string
		stdErr := json.Unmarshal(raw, &std)
		// As in a request: encoding/json scans the token, then hands it
		// to text.
		var got text
		err := json.Unmarshal(raw, &got)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: text err %v, encoding/json err %v", raw, err, stdErr)
		}
		if err != nil {
			return
		}
		if utf8.ValidString(string(got)) {
			if string(got) != std {
				t.Fatalf("%q: text %q, encoding/json %q", raw, got, std)
			}
		} else if !strings.ContainsRune(std, utf8.RuneError) {
			t.Fatalf("%q: text kept invalid bytes where encoding/json found none (%q)", raw, std)
		}
	})
}

// TestPlainASCIIPrefix: the word-at-a-time prefix holds only bytes 0x20 to
// 0x7F and stops at the word holding anything else, so checkChars answers
// as the rune loop alone does, byte offsets in its errors included.
func TestPlainASCIIPrefix(t *testing.T) {
	for c := range 256 {
		for pos := range 17 {
			b := []byte(strings.Repeat("a", 24))
			b[pos] = byte(c)
			p := plainASCIIPrefix(string(b))
			if p%8 != 0 || p > pos && (c < 0x20 || c > 0x7F) {
				t.Fatalf("byte %#x at %d: prefix %d", c, pos, p)
			}
			if c >= 0x20 && c <= 0x7F && p != 24 {
				t.Fatalf("byte %#x at %d: prefix %d, want 24", c, pos, p)
			}
		}
	}
	for _, s := range []string{"abcdefgh\x01", "abcdefghijklmnop\xff", "abcdefgh\x00ijk", "abcdefghijklmnopqrstuvw\uFFFE"} {
		if err := checkChars(s); err == nil {
			t.Fatalf("%q taken", s)
		}
	}
	if err := checkChars("abcdefghijklmnop\x01"); err == nil || !strings.Contains(err.Error(), "#x1") {
		t.Fatalf("error %v", err)
	}
	if err := checkChars("abcdefghijklmnopq\xff"); err == nil || !strings.Contains(err.Error(), "byte 17") {
		t.Fatalf("error %v", err)
	}
}

func BenchmarkCheckChars(b *testing.B) {
	s := strings.Repeat("x", 1024)
	for b.Loop() {
		if checkChars(s) != nil {
			b.Fatal("refused")
		}
	}
}
