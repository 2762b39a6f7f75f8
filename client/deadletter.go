package client

import (
	"context"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// DeadLetterSources lists the queues whose dead-letter queue is queue.
func (c *Client) DeadLetterSources(ctx context.Context, queue string) ([]string, error) {
	res, err := call(ctx, c.dlq.ListDeadLetterSources, &sluicev1.ListDeadLetterSourcesRequest{Queue: queue})
	return res.GetSourceQueues(), err
}

// StartRedrive starts moving messages out of a dead-letter queue in the
// background; GetRedrive reports progress.
func (c *Client) StartRedrive(ctx context.Context, req *StartRedriveRequest) (*Redrive, error) {
	res, err := call(ctx, c.dlq.StartRedrive, req)
	return res.GetRedrive(), err
}

// GetRedrive reports a redrive's progress.
func (c *Client) GetRedrive(ctx context.Context, id string) (*Redrive, error) {
	res, err := call(ctx, c.dlq.GetRedrive, &sluicev1.GetRedriveRequest{Id: id})
	return res.GetRedrive(), err
}

// ListRedrives lists redrives, newest first; deadLetterQueue "" lists all.
func (c *Client) ListRedrives(ctx context.Context, deadLetterQueue string) ([]*Redrive, error) {
	res, err := call(ctx, c.dlq.ListRedrives, &sluicev1.ListRedrivesRequest{DeadLetterQueue: deadLetterQueue})
	return res.GetRedrives(), err
}

// CancelRedrive stops a running redrive; what moved stays moved.
func (c *Client) CancelRedrive(ctx context.Context, id string) (*Redrive, error) {
	res, err := call(ctx, c.dlq.CancelRedrive, &sluicev1.CancelRedriveRequest{Id: id})
	return res.GetRedrive(), err
}

// PreviewRedrive says what StartRedrive with the same fields would move
// now (a count, per destination, and a sample) and changes nothing.
func (c *Client) PreviewRedrive(ctx context.Context, req *PreviewRedriveRequest) (*PreviewRedriveResponse, error) {
	return call(ctx, c.dlq.PreviewRedrive, req)
}
