package outbox

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// relation is the layout of the outbox table as the server announced it
// (a Relation message precedes a table's first change in each session and
// follows every ALTER): where each column the relay reads sits in a tuple.
type relation struct {
	name                               string
	id, eventID, key, payload, headers int // column indexes; -1 when absent
}

func newRelation(m *pglogrepl.RelationMessage) *relation {
	r := &relation{name: m.RelationName, id: -1, eventID: -1, key: -1, payload: -1, headers: -1}
	for i, col := range m.Columns {
		switch col.Name {
		case "id":
			r.id = i
		case "event_id":
			r.eventID = i
		case "msg_key":
			r.key = i
		case "payload":
			r.payload = i
		case "headers":
			r.headers = i
		}
	}
	return r
}

// decode reads one inserted row (pgoutput sends columns as text).
func (r *relation) decode(t *pglogrepl.TupleData) (Event, error) {
	var ev Event
	if r.id < 0 || r.eventID < 0 || r.payload < 0 {
		return ev, fmt.Errorf("outbox: cdc: table %s lacks id, event_id or payload", r.name)
	}
	col := func(i int) (string, bool) {
		if i < 0 || i >= len(t.Columns) || t.Columns[i].DataType != pglogrepl.TupleDataTypeText {
			return "", false
		}
		return string(t.Columns[i].Data), true
	}
	s, ok := col(r.id)
	if !ok {
		return ev, fmt.Errorf("outbox: cdc: table %s: a row without id", r.name)
	}
	var err error
	if ev.ID, err = strconv.ParseInt(s, 10, 64); err != nil {
		return ev, fmt.Errorf("outbox: cdc: table %s: id %q: %w", r.name, s, err)
	}
	if ev.EventID, ok = col(r.eventID); !ok || ev.EventID == "" {
		return ev, fmt.Errorf("outbox: cdc: row id %d has no event_id", ev.ID)
	}
	ev.Key, _ = col(r.key)
	p, ok := col(r.payload)
	if !ok {
		return ev, fmt.Errorf("outbox: cdc: row id %d (event %q) has no payload", ev.ID, ev.EventID)
	}
	if ev.Payload, err = byteaText(p); err != nil {
		return ev, fmt.Errorf("outbox: cdc: row id %d (event %q): payload: %w", ev.ID, ev.EventID, err)
	}
	if h, ok := col(r.headers); ok {
		if ev.Headers, err = decodeHeaders([]byte(h)); err != nil {
			return ev, fmt.Errorf("outbox: cdc: row id %d (event %q): %w", ev.ID, ev.EventID, err)
		}
	}
	return ev, nil
}

// byteaText decodes bytea's hex text output ("\x4869"), which the session
// asks for (bytea_output=hex).
func byteaText(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, `\x`)
	if !ok {
		return nil, fmt.Errorf("want bytea hex output (\\x…), got %.20q", s)
	}
	return hex.DecodeString(h)
}

// checkInsert walks an Insert message's tuple before pglogrepl decodes it:
// its decoder allocates each column's declared length before looking at
// how many bytes there are, so a damaged length would ask for up to 4 GiB.
func checkInsert(data []byte) error {
	bad := func(what string) error {
		return fmt.Errorf("outbox: cdc: malformed insert message (%d bytes): %s", len(data), what)
	}
	// 'I', relation id (4), 'N', column count (2).
	if len(data) < 8 || data[5] != 'N' {
		return bad("short header")
	}
	n := int(binary.BigEndian.Uint16(data[6:8]))
	rest := data[8:]
	for range n {
		if len(rest) < 1 {
			return bad("fewer columns than announced")
		}
		kind := rest[0]
		rest = rest[1:]
		if kind != pglogrepl.TupleDataTypeText && kind != pglogrepl.TupleDataTypeBinary {
			continue
		}
		if len(rest) < 4 {
			return bad("truncated column length")
		}
		l := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(l) > uint64(len(rest)) {
			return bad("column longer than the message")
		}
		rest = rest[l:]
	}
	return nil
}
