package console

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
)

// The forms that change queues and topics: create, settings, purge, delete. Each is a POST
// from the console's own origin (page checks it), calls the API once, and redirects to the
// page that shows the result with a "done" notice (post/redirect/get, so a reload never
// repeats it). The API validates; its refusal is shown as the page's error. Purge and
// delete ask the name to be typed again, a confirmation that needs no script.

// notices are the texts a redirect may ask for (?done=…): a fixed set, so a link cannot
// make the console say something it did not do.
var notices = map[string]string{
	"queue-created": "Queue created.",
	"queue-updated": "Settings saved.",
	"queue-purged":  "Queue purged: %s messages deleted.",
	"queue-deleted": "Queue deleted.",
	"topic-created": "Topic created.",
	"topic-deleted": "Topic deleted.",
}

// noticeOf is the notice r's query asks for, or "".
func noticeOf(r *http.Request) string {
	text, ok := notices[r.URL.Query().Get("done")]
	if !ok {
		return ""
	}
	if strings.Contains(text, "%s") {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil {
			return ""
		}
		text = fmt.Sprintf(text, strconv.FormatInt(n, 10))
	}
	return text
}

func done(path, what string, extra ...string) error {
	q := url.Values{"done": {what}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return redirectTo(path + "?" + q.Encode())
}

// seconds reads a form field of seconds (a decimal number, ≥ 0) as a duration; empty is
// nil (leave the default).
func seconds(r *http.Request, field string) (*durationpb.Duration, error) {
	v := strings.TrimSpace(r.FormValue(field))
	if v == "" {
		return nil, nil
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s < 0 || math.IsInf(s, 0) || s > 100*365*24*3600 {
		return nil, badRequest(fmt.Sprintf("%s: %q is not a number of seconds", field, v))
	}
	return durationpb.New(time.Duration(s * float64(time.Second))), nil
}

// integer reads a form field as a non-negative integer; empty is 0.
func integer(r *http.Request, field string, max int64) (int64, error) {
	v := strings.TrimSpace(r.FormValue(field))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > max {
		return 0, badRequest(fmt.Sprintf("%s: %q is not a whole number from 0 to %d", field, v, max))
	}
	return n, nil
}

// queueForm reads the fields the create and settings forms share.
func queueForm(r *http.Request) (*client.QueueConfig, error) {
	cfg := &client.QueueConfig{}
	var err error
	if cfg.VisibilityTimeout, err = seconds(r, "visibility"); err != nil {
		return nil, err
	}
	if cfg.Retention, err = seconds(r, "retention"); err != nil {
		return nil, err
	}
	if cfg.Delay, err = seconds(r, "delay"); err != nil {
		return nil, err
	}
	if cfg.MaxMessageBytes, err = integer(r, "max_message_bytes", math.MaxInt32); err != nil {
		return nil, err
	}
	if dlq := strings.TrimSpace(r.FormValue("dlq")); dlq != "" {
		n, err := integer(r, "max_receives", math.MaxInt32)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, badRequest("max_receives: a dead-letter queue needs how many receives move a message there")
		}
		cfg.DeadLetter = &client.DeadLetterPolicy{Queue: dlq, MaxReceives: int32(n)}
	}
	return cfg, nil
}

func (c *Console) createQueue(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	name := strings.TrimSpace(r.FormValue("name"))
	if name == "" {
		return "", nil, badRequest("name the queue")
	}
	cfg, err := queueForm(r)
	if err != nil {
		return "", nil, err
	}
	cfg.Fifo = r.FormValue("fifo") != ""
	cfg.ContentBasedDeduplication = cfg.Fifo && r.FormValue("content_dedup") != ""
	if _, err := api.CreateQueue(ctx, name, cfg); err != nil {
		return "", nil, err
	}
	return "", nil, done(Prefix+"/queues/"+url.PathEscape(name), "queue-created")
}

// updateQueue saves the settings form: every field it shows is written (an emptied
// dead-letter queue removes the policy; an emptied duration or size is the default).
func (c *Console) updateQueue(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	name := r.PathValue("name")
	cfg, err := queueForm(r)
	if err != nil {
		return "", nil, err
	}
	fields := []string{"visibility_timeout", "retention", "delay", "max_message_bytes", "dead_letter"}
	if _, err := api.UpdateQueue(ctx, name, cfg, fields...); err != nil {
		return "", nil, err
	}
	return "", nil, done(Prefix+"/queues/"+url.PathEscape(name), "queue-updated")
}

// confirmed: the form's "confirm" field repeats the name, so a stray click does nothing.
func confirmed(r *http.Request, name, what string) error {
	if r.FormValue("confirm") != name {
		return badRequest(fmt.Sprintf("type %q to confirm the %s", name, what))
	}
	return nil
}

func (c *Console) purgeQueue(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	name := r.PathValue("name")
	if err := confirmed(r, name, "purge"); err != nil {
		return "", nil, err
	}
	n, err := api.PurgeQueue(ctx, name)
	if err != nil {
		return "", nil, err
	}
	return "", nil, done(Prefix+"/queues/"+url.PathEscape(name), "queue-purged", "n", strconv.FormatInt(n, 10))
}

func (c *Console) deleteQueue(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	name := r.PathValue("name")
	if err := confirmed(r, name, "deletion"); err != nil {
		return "", nil, err
	}
	if err := api.DeleteQueue(ctx, name); err != nil {
		return "", nil, err
	}
	return "", nil, done(Prefix+"/queues", "queue-deleted")
}

func (c *Console) createTopic(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	name := strings.TrimSpace(r.FormValue("name"))
	if name == "" {
		return "", nil, badRequest("name the topic")
	}
	parts, err := integer(r, "partitions", math.MaxInt32)
	if err != nil {
		return "", nil, err
	}
	cfg := &client.TopicConfig{Partitions: int32(parts)}
	if cfg.Retention, err = seconds(r, "retention"); err != nil {
		return "", nil, err
	}
	if _, err := api.CreateTopic(ctx, name, cfg); err != nil {
		return "", nil, err
	}
	return "", nil, done(Prefix+"/topics/"+url.PathEscape(name), "topic-created")
}

func (c *Console) deleteTopic(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	name := r.PathValue("name")
	if err := confirmed(r, name, "deletion"); err != nil {
		return "", nil, err
	}
	if err := api.DeleteTopic(ctx, name); err != nil {
		return "", nil, err
	}
	return "", nil, done(Prefix+"/topics", "topic-deleted")
}
