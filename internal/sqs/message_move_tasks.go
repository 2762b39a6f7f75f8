package sqs

import (
	"encoding/xml"
	"errors"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// Message move tasks (SQS's "DLQ redrive") run on the broker's redrive
// tasks; the task handle is the broker's task id.

func init() {
	register("StartMessageMoveTask", handle(startMessageMoveTask))
	register("ListMessageMoveTasks", handle(listMessageMoveTasks))
	register("CancelMessageMoveTask", handle(cancelMessageMoveTask))
}

// maxMoveRate is SQS's bound on MaxNumberOfMessagesPerSecond.
const maxMoveRate = 500

type startMoveTaskInput struct {
	SourceArn                    string `json:"SourceArn"`
	DestinationArn               string `json:"DestinationArn"`
	MaxNumberOfMessagesPerSecond *int   `json:"MaxNumberOfMessagesPerSecond"`
}

func (in *startMoveTaskInput) fromQuery(f form) (err error) {
	in.SourceArn = f.str("SourceArn")
	in.DestinationArn = f.str("DestinationArn")
	in.MaxNumberOfMessagesPerSecond, err = f.intp("MaxNumberOfMessagesPerSecond")
	return err
}

type startMoveTaskOutput struct {
	TaskHandle string `json:"TaskHandle" xml:"TaskHandle"`
}

// arnQueue resolves an ARN parameter to an existing queue on which the
// caller may do op.
func (h *Handler) arnQueue(c *call, op auth.Operation, param, arn string) (string, error) {
	if arn == "" {
		return "", missing(param)
	}
	name, ok := queueFromARN(arn)
	if !ok {
		return "", invalidValue(param, arn, "not a valid SQS queue ARN")
	}
	if err := h.allowOp(c, op, name); err != nil {
		return "", err
	}
	if _, err := h.b.GetQueue(name); err != nil {
		return "", newError(errResourceNotFound, "The resource that you specified for the %s parameter doesn't exist.", param)
	}
	return name, nil
}

// startMessageMoveTask moves messages out of a dead-letter queue: to
// DestinationArn, or without one each back to the queue it came from. As
// in SQS, the source must be some queue's dead-letter queue, and one task
// runs at a time per source.
func startMessageMoveTask(h *Handler, c *call, in *startMoveTaskInput) (any, error) {
	src, err := h.arnQueue(c, auth.Redrive, "SourceArn", in.SourceArn)
	if err != nil {
		return nil, err
	}
	req := broker.RedriveRequest{Source: src}
	if in.DestinationArn != "" {
		if req.Destination, err = h.arnQueue(c, auth.Produce, "DestinationArn", in.DestinationArn); err != nil {
			return nil, err
		}
	}
	if r := in.MaxNumberOfMessagesPerSecond; r != nil {
		if *r < 1 || *r > maxMoveRate {
			return nil, invalidValue("MaxNumberOfMessagesPerSecond", *r, "must be between 1 and 500")
		}
		req.RatePerSecond = *r
	}
	if len(h.deadLetterSources(src)) == 0 {
		return nil, invalidValue("SourceArn", in.SourceArn, "Source queue must be configured as a Dead Letter Queue")
	}
	task, err := h.b.StartRedrive(req)
	if errors.Is(err, broker.ErrRedriveRunning) {
		return nil, newError(errInvalidParameter, "There is already a task running. Only one active task is allowed for each source queue arn at a given time.")
	}
	if err != nil {
		return nil, toAPIError(err)
	}
	return startMoveTaskOutput{task.ID}, nil
}

type listMoveTasksInput struct {
	SourceArn  string `json:"SourceArn"`
	MaxResults *int   `json:"MaxResults"`
}

func (in *listMoveTasksInput) fromQuery(f form) (err error) {
	in.SourceArn = f.str("SourceArn")
	in.MaxResults, err = f.intp("MaxResults")
	return err
}

type moveTask struct {
	XMLName                           xml.Name `json:"-" xml:"ListMessageMoveTasksResultEntry"`
	TaskHandle                        string   `json:"TaskHandle,omitempty" xml:"TaskHandle,omitempty"`
	Status                            string   `json:"Status" xml:"Status"`
	SourceArn                         string   `json:"SourceArn" xml:"SourceArn"`
	DestinationArn                    string   `json:"DestinationArn,omitempty" xml:"DestinationArn,omitempty"`
	MaxNumberOfMessagesPerSecond      int      `json:"MaxNumberOfMessagesPerSecond,omitempty" xml:"MaxNumberOfMessagesPerSecond,omitempty"`
	ApproximateNumberOfMessagesMoved  int64    `json:"ApproximateNumberOfMessagesMoved" xml:"ApproximateNumberOfMessagesMoved"`
	ApproximateNumberOfMessagesToMove int64    `json:"ApproximateNumberOfMessagesToMove" xml:"ApproximateNumberOfMessagesToMove"`
	FailureReason                     string   `json:"FailureReason,omitempty" xml:"FailureReason,omitempty"`
	StartedTimestamp                  int64    `json:"StartedTimestamp" xml:"StartedTimestamp"`
}

type listMoveTasksOutput struct {
	Results []moveTask `json:"Results"`
}

// maxMoveTaskResults is SQS's bound on ListMessageMoveTasks's MaxResults.
const maxMoveTaskResults = 10

// listMessageMoveTasks reports a source's most recent tasks, newest first;
// only a running task carries a handle, as in SQS.
func listMessageMoveTasks(h *Handler, c *call, in *listMoveTasksInput) (any, error) {
	src, err := h.arnQueue(c, auth.Describe, "SourceArn", in.SourceArn)
	if err != nil {
		return nil, err
	}
	limit := 1
	if n := in.MaxResults; n != nil {
		if *n < 1 || *n > maxMoveTaskResults {
			return nil, invalidValue("MaxResults", *n, "must be between 1 and 10")
		}
		limit = *n
	}
	// In a cluster a source's tasks run on its leader: asked elsewhere, this is forwarded
	// there (a node answering from its own few would list nothing, or old failures).
	if err := h.b.RedriveTasksHere(src); err != nil {
		return nil, toAPIError(err)
	}
	tasks := h.b.ListRedrives(src)
	out := listMoveTasksOutput{Results: []moveTask{}}
	for _, t := range tasks[:min(limit, len(tasks))] {
		out.Results = append(out.Results, h.moveTask(t))
	}
	return out, nil
}

func (h *Handler) moveTask(t broker.RedriveTask) moveTask {
	m := moveTask{Status: t.Status, SourceArn: h.arn(t.Source), MaxNumberOfMessagesPerSecond: t.RatePerSecond,
		ApproximateNumberOfMessagesMoved: t.Moved, ApproximateNumberOfMessagesToMove: t.ToMove,
		FailureReason: t.Failure, StartedTimestamp: t.StartedAt.UnixMilli()}
	if t.Status == broker.RedriveRunning {
		m.TaskHandle = t.ID
	}
	if t.Destination != "" {
		m.DestinationArn = h.arn(t.Destination)
	}
	return m
}

type cancelMoveTaskInput struct {
	TaskHandle string `json:"TaskHandle"`
}

func (in *cancelMoveTaskInput) fromQuery(f form) error {
	in.TaskHandle = f.str("TaskHandle")
	return nil
}

type cancelMoveTaskOutput struct {
	ApproximateNumberOfMessagesMoved int64 `json:"ApproximateNumberOfMessagesMoved" xml:"ApproximateNumberOfMessagesMoved"`
}

// cancelMessageMoveTask stops a running task; messages already moved stay
// moved. Only a running task can be cancelled, as in SQS.
func cancelMessageMoveTask(h *Handler, c *call, in *cancelMoveTaskInput) (any, error) {
	if in.TaskHandle == "" {
		return nil, missing("TaskHandle")
	}
	t, err := h.b.GetRedrive(in.TaskHandle)
	if errors.Is(err, broker.ErrRedriveNotFound) {
		return nil, newError(errResourceNotFound, "The task handle %s does not name a message move task.", in.TaskHandle)
	}
	if err != nil {
		return nil, toAPIError(err)
	}
	if err := h.allow(c, c.action, t.Source); err != nil {
		return nil, err
	}
	if t.Status != broker.RedriveRunning {
		return nil, invalidValue("TaskHandle", in.TaskHandle, "Only RUNNING tasks can be cancelled; this one is "+t.Status)
	}
	if t, err = h.b.CancelRedrive(in.TaskHandle); err != nil {
		return nil, toAPIError(err)
	}
	return cancelMoveTaskOutput{t.Moved}, nil
}
