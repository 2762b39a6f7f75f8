package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/client"
)

func badRequest(msg string) error {
	return &client.Error{Code: connect.CodeInvalidArgument, Reason: "INVALID_ARGUMENT", Message: msg}
}

// sample is the last reading of two counters of one queue, for rates.
type sample struct {
	at     time.Time
	a, b   uint64
	ra, rb rate // the rates computed at the last fresh reading
}

// rate is a counter's rate between two page loads, if known.
type rate struct {
	PerSecond float64
	Known     bool
}

func (r rate) String() string {
	if !r.Known {
		return "–"
	}
	return fmt.Sprintf("%.1f/s", r.PerSecond)
}

// minSampleGap: readings closer than this keep the rate computed before,
// so two tabs refreshing at once do not show 0 or noise.
const minSampleGap = 2 * time.Second

// rates turns two counters of key into per-second rates since the
// previous reading (the console holds no history: a rate is known from
// the second page load on).
func (c *Console) rates(key string, a, b uint64) (rate, rate) {
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.samples[key]
	if ok && now.Sub(prev.at) < minSampleGap {
		return prev.ra, prev.rb
	}
	s := sample{at: now, a: a, b: b}
	if ok && a >= prev.a && b >= prev.b {
		secs := now.Sub(prev.at).Seconds()
		s.ra = rate{float64(a-prev.a) / secs, true}
		s.rb = rate{float64(b-prev.b) / secs, true}
	}
	if len(c.samples) > 10_000 { // queues come and go: never grow without bound
		clear(c.samples)
	}
	c.samples[key] = s
	return s.ra, s.rb
}

func depth(st *client.QueueStats) int64 { return st.GetVisible() + st.GetInFlight() + st.GetDelayed() }

var funcs = template.FuncMap{
	"depth": depth,
	// nodes is a list of node ids as the CLI prints them ("2, 3, 1"), not Go's "[2 3 1]".
	"nodes": func(ids []int32) string {
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = strconv.Itoa(int(id))
		}
		return strings.Join(parts, ", ")
	},
	"age": func(d *durationpb.Duration) string {
		if d == nil || d.AsDuration() == 0 {
			return "–"
		}
		return d.AsDuration().Round(time.Second).String()
	},
	"seconds": func(s float64) string {
		if s == 0 {
			return "0s"
		}
		return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
	},
	// latency is a short duration (an fdatasync's), to the microsecond.
	"latency": func(s float64) string {
		if s == 0 {
			return "–"
		}
		return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
	},
	// secs is a duration as a form's number of seconds ("" when unset).
	"secs": func(d *durationpb.Duration) string {
		if d == nil {
			return ""
		}
		return strconv.FormatFloat(d.AsDuration().Seconds(), 'f', -1, 64)
	},
	"when": func(t *timestamppb.Timestamp) string {
		if t == nil {
			return "–"
		}
		return t.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	},
	"body":  body,
	"lower": strings.ToLower,
	"trim":  strings.TrimPrefix,
	"pct": func(a, b int64) int64 {
		if b <= 0 {
			return 100
		}
		return min(100, a*100/b)
	},
	"add": func(a, b int64) int64 { return a + b },
	"sub": func(a, b int64) int64 { return a - b },
	"running": func(r *client.Redrive) bool {
		return r.GetState() == 1 // REDRIVE_STATE_RUNNING
	},
}

// body shows a message body: text as is (the template escapes it), other
// bytes as hex, cut at 300 characters either way.
func body(b []byte) string {
	const max = 300
	s := string(b)
	if !utf8.Valid(b) {
		s = fmt.Sprintf("(%d bytes) %x", len(b), b[:min(len(b), max/2)])
	}
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// api serves one JSON endpoint of the console's own script with the
// browser's client: the redrive progress the page polls.
func (c *Console) api(fn func(ctx context.Context, r *http.Request, api *client.Client) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api, _, ok := c.client(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(withPeer(r.Context(), r.RemoteAddr), 10*time.Second)
		defer cancel()
		v, err := fn(ctx, r, api)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(httpStatus(codeOf(err)))
			_ = json.NewEncoder(w).Encode(map[string]string{"error": errorText(err)})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	})
}

// redriveProgress is what the redrive page's script reads.
type redriveProgress struct {
	State  string `json:"state"`
	Moved  int64  `json:"moved"`
	ToMove int64  `json:"to_move"`
	Error  string `json:"error,omitempty"`
}

func (c *Console) redriveJSON(ctx context.Context, r *http.Request, api *client.Client) (any, error) {
	rd, err := api.GetRedrive(ctx, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return redriveProgress{State: strings.ToLower(strings.TrimPrefix(rd.GetState().String(), "REDRIVE_STATE_")),
		Moved: rd.GetMoved(), ToMove: rd.GetToMove(), Error: rd.GetError().GetMetadata()["message"]}, nil
}
