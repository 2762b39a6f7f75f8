package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// browsePage is how many messages or records the browser shows at once.
const browsePage = 20

// queueRow is one line of the queues table.
type queueRow struct {
	Q                 *client.Queue
	SendRate, AckRate rate
	DLQ               string // its dead-letter queue, if any
	IsDLQ             bool   // other queues dead-letter into it
}

func (c *Console) queueRows(ctx context.Context, api *client.Client) ([]queueRow, error) {
	qs, err := api.ListQueues(ctx, "")
	if err != nil {
		return nil, err
	}
	rows := make([]queueRow, len(qs))
	for i, q := range qs {
		st := q.GetStats()
		send, ack := c.rates("queue/"+q.GetName(), st.GetSentTotal(), st.GetAckedTotal())
		rows[i] = queueRow{Q: q, SendRate: send, AckRate: ack, DLQ: q.GetConfig().GetDeadLetter().GetQueue(),
			IsDLQ: len(q.GetDeadLetterSources()) > 0}
	}
	return rows, nil
}

type overviewData struct {
	Node                                  *nodeHealth // nil: the admin endpoint refused (no describe on the cluster)
	Queues, DLQs, Topics, Groups          int
	Visible, InFlight, Delayed, DeadDepth int64
	SendRate, AckRate                     float64
	Attention                             []queueRow // dead-letter queues holding messages
}

func (c *Console) overview(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	rows, err := c.queueRows(ctx, api)
	if err != nil {
		return "", nil, err
	}
	topics, err := api.ListTopics(ctx, "")
	if err != nil {
		return "", nil, err
	}
	groups, err := api.ListGroups(ctx)
	if err != nil {
		return "", nil, err
	}
	d := overviewData{Queues: len(rows), Topics: len(topics), Groups: len(groups), Node: c.nodeHealth(ctx, r)}
	for _, r := range rows {
		st := r.Q.GetStats()
		d.Visible += st.GetVisible()
		d.InFlight += st.GetInFlight()
		d.Delayed += st.GetDelayed()
		d.SendRate += r.SendRate.PerSecond
		d.AckRate += r.AckRate.PerSecond
		if r.IsDLQ {
			d.DLQs++
			if n := depth(st); n > 0 {
				d.DeadDepth += n
				d.Attention = append(d.Attention, r)
			}
		}
	}
	return "overview", d, nil
}

func (c *Console) queues(ctx context.Context, _ *http.Request, api *client.Client) (string, any, error) {
	rows, err := c.queueRows(ctx, api)
	return "queues", rows, err
}

type queueData struct {
	Q        *client.Queue
	Peek     *client.PeekResponse
	From     uint64
	IsDLQ    bool
	Redrives []*client.Redrive
}

func (c *Console) queue(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	name := r.PathValue("name")
	q, err := api.GetQueue(ctx, name)
	if err != nil {
		return "", nil, err
	}
	from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
	peek, err := api.Peek(ctx, name, from, browsePage)
	if err != nil {
		return "", nil, err
	}
	d := queueData{Q: q, Peek: peek, From: from, IsDLQ: len(q.GetDeadLetterSources()) > 0}
	if d.IsDLQ {
		if d.Redrives, err = api.ListRedrives(ctx, name); err != nil {
			return "", nil, err
		}
	}
	return "queue", d, nil
}

// redriveForm is the redrive form's fields, as the preview and the start
// read them.
type redriveForm struct {
	DLQ, To, Source string
	Limit           int64
	Rate            int32
}

func readRedriveForm(r *http.Request) redriveForm {
	f := redriveForm{DLQ: r.PathValue("name"), To: r.FormValue("to"), Source: r.FormValue("source")}
	f.Limit, _ = strconv.ParseInt(r.FormValue("limit"), 10, 64)
	rate, _ := strconv.ParseInt(r.FormValue("rate"), 10, 32)
	f.Rate = int32(rate)
	return f
}

func (f redriveForm) filter() *client.RedriveFilter {
	if f.Source == "" {
		return nil
	}
	return &client.RedriveFilter{SourceQueue: f.Source}
}

type previewData struct {
	Form    redriveForm
	Preview *client.PreviewRedriveResponse
}

func (c *Console) previewRedrive(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	f := readRedriveForm(r)
	sample := int32(browsePage)
	p, err := api.PreviewRedrive(ctx, &client.PreviewRedriveRequest{DeadLetterQueue: f.DLQ, DestinationQueue: f.To,
		Filter: f.filter(), Limit: f.Limit, SampleSize: &sample})
	return "preview", previewData{Form: f, Preview: p}, err
}

func (c *Console) startRedrive(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	f := readRedriveForm(r)
	rd, err := api.StartRedrive(ctx, &client.StartRedriveRequest{DeadLetterQueue: f.DLQ, DestinationQueue: f.To,
		Filter: f.filter(), Limit: f.Limit, MaxPerSecond: f.Rate})
	if err != nil {
		return "", nil, err
	}
	return "", nil, redirectTo(Prefix + "/redrives/" + rd.GetId())
}

func (c *Console) redrive(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	rd, err := api.GetRedrive(ctx, r.PathValue("id"))
	return "redrive", rd, err
}

func (c *Console) topics(ctx context.Context, _ *http.Request, api *client.Client) (string, any, error) {
	ts, err := api.ListTopics(ctx, "")
	return "topics", ts, err
}

func (c *Console) topic(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	t, err := api.DescribeTopic(ctx, r.PathValue("name"))
	return "topic", t, err
}

type partitionData struct {
	Topic     string
	Partition int32
	Offset    int64
	Time      string // the time asked for, if the offset was found from one
	Records   *sluicev1.PartitionRecords
}

// parseTime reads the browser's datetime-local value (no zone: UTC, as the
// page says) or an RFC 3339 time.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("not a time: %q", s)
}

func (c *Console) partition(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	d := partitionData{Topic: r.PathValue("name")}
	p, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || p < 0 {
		return "", nil, badRequest("partition " + r.PathValue("partition") + " is not a partition number")
	}
	d.Partition = int32(p)
	q := r.URL.Query()
	if o := q.Get("offset"); o != "" && q.Get("time") == "" {
		if d.Offset, err = strconv.ParseInt(o, 10, 64); err != nil || d.Offset < 0 {
			return "", nil, badRequest("offset " + o + " is not an offset")
		}
	} else {
		// From a time (the first record at or after it), or the first stored.
		req := &client.ListOffsetsRequest{Topic: d.Topic, Partitions: []int32{d.Partition},
			Spec: &sluicev1.ListOffsetsRequest_Earliest{Earliest: true}}
		if tm := q.Get("time"); tm != "" {
			at, err := parseTime(tm)
			if err != nil {
				return "", nil, badRequest("time " + tm + ": want 2006-01-02T15:04:05Z (UTC) or RFC 3339")
			}
			d.Time = at.UTC().Format("2006-01-02T15:04:05")
			req.Spec = &sluicev1.ListOffsetsRequest_Time{Time: timestamppb.New(at)}
		}
		offs, err := api.ListOffsets(ctx, req)
		if err != nil {
			return "", nil, err
		}
		if len(offs) > 0 {
			d.Offset = offs[0].GetOffset()
		}
	}
	res, err := api.Fetch(ctx, &client.FetchRequest{Topic: d.Topic, MaxRecords: browsePage, MaxBytes: 1 << 20,
		Partitions: []*client.PartitionOffset{{Partition: d.Partition, Offset: d.Offset}}})
	if err != nil {
		return "", nil, err
	}
	for _, pr := range res.GetPartitions() {
		if pr.GetPartition() == d.Partition {
			d.Records = pr
		}
	}
	return "partition", d, nil
}

type groupRow struct {
	G          *client.GroupSummary
	Desc       *client.DescribeGroupResponse
	LagRecords int64
	LagSeconds float64 // the largest of its partitions'
}

func (c *Console) groups(ctx context.Context, _ *http.Request, api *client.Client) (string, any, error) {
	gs, err := api.ListGroups(ctx)
	if err != nil {
		return "", nil, err
	}
	rows := make([]groupRow, 0, len(gs))
	for _, g := range gs {
		d, err := api.DescribeGroup(ctx, g.GetGroup())
		if err != nil {
			return "", nil, err
		}
		rows = append(rows, lagOf(g, d))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].G.GetGroup() < rows[j].G.GetGroup() })
	return "groups", rows, nil
}

func lagOf(g *client.GroupSummary, d *client.DescribeGroupResponse) groupRow {
	row := groupRow{G: g, Desc: d}
	for _, p := range d.GetPartitions() {
		row.LagRecords += p.GetLagMessages()
		row.LagSeconds = max(row.LagSeconds, p.GetLag().AsDuration().Seconds())
	}
	return row
}

func (c *Console) group(ctx context.Context, r *http.Request, api *client.Client) (string, any, error) {
	d, err := api.DescribeGroup(ctx, r.PathValue("name"))
	if err != nil {
		return "", nil, err
	}
	return "group", lagOf(d.GetSummary(), d), nil
}

func (c *Console) subscriptions(ctx context.Context, _ *http.Request, api *client.Client) (string, any, error) {
	ts, err := api.ListTopics(ctx, "")
	if err != nil {
		return "", nil, err
	}
	var subs []*client.Subscription
	for _, t := range ts {
		ss, err := api.ListSubscriptions(ctx, t.GetName())
		if err != nil {
			return "", nil, err
		}
		subs = append(subs, ss...)
	}
	return "subscriptions", subs, nil
}
