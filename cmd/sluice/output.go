package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The CLI's JSON is the API's JSON (docs/api.md: camelCase names, enums by
// name, bytes in base64, durations as "1.5s", times in RFC 3339) with two
// changes for scripts: every field is present, zero or not (partition 0
// is "partition":0, not a missing key), and 64-bit integers are JSON
// numbers rather than the strings proto3's mapping makes of them, so
// `jq '.offset + 1'` works. A command prints exactly one document, except
// the streaming ones (--follow), which print one document per line.

// protoJSON renders m as described above.
func protoJSON(m proto.Message) (json.RawMessage, error) {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v = numbersOf(m.ProtoReflect().Descriptor(), v)
	return json.Marshal(v)
}

// numbersOf walks a decoded protojson value beside its descriptor and turns
// the quoted 64-bit integers back into numbers. It leaves well-known types
// (Duration, Timestamp, …) alone: their JSON form is a string by design.
func numbersOf(md protoreflect.MessageDescriptor, v any) any {
	obj, ok := v.(map[string]any)
	if !ok || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return v
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		val, ok := obj[fd.JSONName()]
		if !ok || val == nil {
			continue
		}
		switch {
		case fd.IsMap():
			if m, ok := val.(map[string]any); ok {
				for k, e := range m {
					m[k] = fieldNumbers(fd.MapValue(), e)
				}
			}
		case fd.IsList():
			if l, ok := val.([]any); ok {
				for k, e := range l {
					l[k] = fieldNumbers(fd, e)
				}
			}
		default:
			obj[fd.JSONName()] = fieldNumbers(fd, val)
		}
	}
	return v
}

// fieldNumbers converts one value of field fd (one element of a list).
func fieldNumbers(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return numbersOf(fd.Message(), v)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	}
	return v
}

// printJSON writes m as one JSON document and a newline.
func printJSON(w io.Writer, m proto.Message) error {
	b, err := protoJSON(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printJSONObject writes one document whose members are given in order;
// a proto.Message member is rendered as printJSON would, anything else
// with encoding/json. It is how a command that gathers several answers
// (dlq list: queues and redrives) still prints a single document.
func printJSONObject(w io.Writer, members ...any) error {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i := 0; i+1 < len(members); i += 2 {
		key, _ := members[i].(string)
		var val []byte
		var err error
		if m, ok := members[i+1].(proto.Message); ok {
			val, err = protoJSON(m)
		} else {
			val, err = json.Marshal(members[i+1])
		}
		if err != nil {
			return err
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(val)
	}
	buf.WriteString("}\n")
	_, err := w.Write(buf.Bytes())
	return err
}

// protoList renders a list of messages as a JSON array, for
// printJSONObject.
func protoList[M proto.Message](ms []M) (json.RawMessage, error) {
	parts := make([][]byte, len(ms))
	for i, m := range ms {
		b, err := protoJSON(m)
		if err != nil {
			return nil, err
		}
		parts[i] = b
	}
	return append(append([]byte{'['}, bytes.Join(parts, []byte{','})...), ']'), nil
}

// table prints aligned columns with a header row. Put a column whose width
// varies a lot (a body, a value) last: tabwriter pads every cell but the
// last of a line to its column's widest, so a 1 MB body in the middle
// would pad every row, the header included, to 1 MB.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// printable shows a body as text when it is, quoted otherwise (a table
// cell must stay on one line and hold no tab).
func printable(b []byte) string {
	s := string(b)
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}
