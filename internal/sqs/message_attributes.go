package sqs

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/internal/broker"
)

// msgAttr is a message attribute value on the wire (MessageAttributeValue).
// The list types are "reserved for future use" in SQS and refused here too.
type msgAttr struct {
	DataType         string   `json:"DataType"`
	StringValue      *text    `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"`
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
}

// msgAttrs is a map of attributes; in XML a flattened list of
// <Name>/<Value> entries.
type msgAttrs map[string]msgAttr

// MarshalXML writes one element named like the field per attribute, sorted
// by name.
func (m msgAttrs) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	type value struct {
		StringValue *text  `xml:"StringValue,omitempty"`
		BinaryValue string `xml:"BinaryValue,omitempty"`
		DataType    string `xml:"DataType"`
	}
	type entry struct {
		Name  string `xml:"Name"`
		Value value  `xml:"Value"`
	}
	for _, name := range sortedKeys(m) {
		a := m[name]
		v := value{StringValue: a.StringValue, DataType: a.DataType}
		if a.BinaryValue != nil {
			v.BinaryValue = base64.StdEncoding.EncodeToString(a.BinaryValue)
		}
		if err := e.EncodeElement(entry{name, v}, start); err != nil {
			return err
		}
	}
	return nil
}

// msgAttrsFromForm reads prefix.N.Name and prefix.N.Value.* parameters.
func msgAttrsFromForm(f form, prefix string) (msgAttrs, error) {
	gs := f.indexed(prefix)
	if len(gs) == 0 {
		return nil, nil
	}
	out := make(msgAttrs, len(gs))
	for _, g := range gs {
		a := msgAttr{DataType: g.str("Value.DataType"), StringValue: textp(g.strp("Value.StringValue"))}
		if g.has("Value.BinaryValue") {
			b, err := base64.StdEncoding.DecodeString(g.str("Value.BinaryValue"))
			if err != nil {
				return nil, invalidValue("BinaryValue", "", "not valid base64")
			}
			a.BinaryValue = b
		}
		a.StringListValues = g.list("Value.StringListValue")
		out[g.str("Name")] = a
	}
	return out, nil
}

// Limits of message attributes, as SQS has them.
const (
	maxMessageAttributes = 10
	maxAttrNameLen       = 256
)

var (
	attrNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	numberRE   = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
)

// toBroker checks attributes against SQS's rules and converts them.
func (m msgAttrs) toBroker() (map[string]broker.Attribute, error) {
	if len(m) == 0 {
		return nil, nil
	}
	if len(m) > maxMessageAttributes {
		return nil, newError(errInvalidParameter, "Number of message attributes [%d] exceeds the allowed maximum [%d].", len(m), maxMessageAttributes)
	}
	out := make(map[string]broker.Attribute, len(m))
	for name, a := range m {
		if err := checkAttrName(name); err != nil {
			return nil, err
		}
		v, err := a.value(name)
		if err != nil {
			return nil, err
		}
		out[name] = broker.Attribute{DataType: a.DataType, Value: v}
	}
	return out, nil
}

func checkAttrName(name string) error {
	lower := strings.ToLower(name)
	switch {
	case name == "":
		return newError(errInvalidParameter, "The request must contain non-empty message attribute name.")
	case len(name) > maxAttrNameLen, !attrNameRE.MatchString(name),
		strings.HasPrefix(name, "."), strings.HasSuffix(name, "."), strings.Contains(name, ".."):
		return newError(errInvalidParameter, "Message (user) attribute name '%s' is invalid. Names may use letters, digits, '_', '-' and '.', up to 256 characters, without leading, trailing or repeated periods.", name)
	case strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon."):
		return newError(errInvalidParameter, "Message (user) attribute name '%s' is invalid. The AWS. and Amazon. prefixes are reserved.", name)
	}
	return nil
}

// baseType is String, Number or Binary: the data type before any ".custom".
func baseType(dataType string) string {
	base, _, _ := strings.Cut(dataType, ".")
	return base
}

// value checks one attribute's type and value and returns the bytes to store.
func (a msgAttr) value(name string) ([]byte, error) {
	if a.DataType == "" {
		return nil, newError(errInvalidParameter, "The message attribute '%s' must contain non-empty message attribute type.", name)
	}
	if len(a.DataType) > maxAttrNameLen || strings.HasSuffix(a.DataType, ".") {
		return nil, newError(errInvalidParameter, "The message attribute '%s' has an invalid message attribute type.", name)
	}
	if a.StringListValues != nil || a.BinaryListValues != nil {
		return nil, newError(errInvalidParameter, "Message attribute list values in SendMessage operation are not supported.")
	}
	switch t := baseType(a.DataType); t {
	case "String", "Number":
		if a.StringValue == nil || *a.StringValue == "" {
			return nil, newError(errInvalidParameter, "The message attribute '%s' must contain non-empty message attribute value for message attribute type '%s'.", name, t)
		}
		if err := checkChars(string(*a.StringValue)); err != nil {
			return nil, newError(errInvalidParameter, "The message attribute '%s' contains an invalid character: %v.", name, err)
		}
		if t == "Number" && !numberRE.MatchString(string(*a.StringValue)) {
			return nil, newError(errInvalidParameter, "Can't cast the value of message (user) attribute '%s' to a number.", name)
		}
		return []byte(*a.StringValue), nil
	case "Binary":
		if len(a.BinaryValue) == 0 {
			return nil, newError(errInvalidParameter, "The message attribute '%s' must contain non-empty message attribute value for message attribute type 'Binary'.", name)
		}
		return a.BinaryValue, nil
	default:
		return nil, newError(errInvalidParameter, "The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", name)
	}
}

// fromBroker converts stored attributes back to the wire form.
func fromBroker(attrs map[string]broker.Attribute) msgAttrs {
	out := make(msgAttrs, len(attrs))
	for name, a := range attrs {
		w := msgAttr{DataType: a.DataType}
		if baseType(a.DataType) == "Binary" {
			w.BinaryValue = a.Value
		} else {
			s := text(a.Value)
			w.StringValue = &s
		}
		out[name] = w
	}
	return out
}

// md5OfAttributes is the digest SQS returns as MD5OfMessageAttributes (and
// MD5OfMessageSystemAttributes), computed the way the SDKs check it: for each
// attribute in name order, the name, the data type and the value, each
// prefixed by its 4-byte big-endian length, with a transport byte (1 for
// string values, 2 for binary) before the value. Empty input has no digest.
func md5OfAttributes(attrs map[string]broker.Attribute) string {
	if len(attrs) == 0 {
		return ""
	}
	h := md5.New()
	field := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, name := range sortedKeys(attrs) {
		a := attrs[name]
		field([]byte(name))
		field([]byte(a.DataType))
		if baseType(a.DataType) == "Binary" {
			h.Write([]byte{2})
		} else {
			h.Write([]byte{1})
		}
		field(a.Value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// md5Hex is the hex MD5 of a body. It takes the bytes the broker holds or
// was given: converting a 1 KiB body to or from a string only to hash it
// was a copy per message (8 % of the bytes allocated under W2 over SQS).
func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// checkChars enforces SQS's allowed characters: #x9 #xA #xD, #x20-#xD7FF,
// #xE000-#xFFFD and #x10000-#x10FFFF (what XML 1.0 can carry).
func checkChars(s string) error {
	p := plainASCIIPrefix(s)
	for i, r := range s[p:] {
		i += p
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Errorf("invalid UTF-8 at byte %d", i)
			}
		}
		ok := r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) ||
			(r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
		if !ok {
			return fmt.Errorf("invalid character '#x%X'", r)
		}
	}
	return nil
}

// plainASCIIPrefix is a multiple of eight bytes at the start of s that
// are all printable ASCII or DEL (0x20 to 0x7F), all of them characters SQS
// allows, checked a word at a time: a 1 KiB body decoded rune by rune was
// 1.5 % of the server's CPU under W2 over SQS. checkChars looks at the
// rest, from the first word holding anything else.
func plainASCIIPrefix(s string) int {
	const hi, lo = 0x8080808080808080, 0x2020202020202020
	b := stringBytes(s) // read only: one 8-byte load a word, which indexing a string byte by byte is not
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		// A byte with its top bit set, or one below 0x20 (the
		// subtraction borrows into that byte's top bit where the byte
		// itself had none), ends the prefix.
		if w&hi != 0 || (w-lo)&^w&hi != 0 {
			break
		}
	}
	return i
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
