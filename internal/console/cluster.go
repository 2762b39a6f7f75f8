package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
)

// The cluster page reads the node's admin endpoint (/v1/admin/cluster, what `sluice
// cluster status` reads) in-process, with the browser's token: the same authorization
// (describe on the cluster) as the CLI's. It decodes only what it shows, so fields the
// endpoint gains do not break it.

const clusterPath = "/v1/admin/cluster"

type clusterView struct {
	Clustered  bool // false: a single node (the endpoint answered 404)
	Node       int32
	Controller int32
	Nodes      []struct {
		ID                           int32
		KafkaAddr, HTTPAddr, SQSAddr string
		Alive                        bool
	}
	Partitions []struct {
		Topic             string
		Partition, Leader int32
		Term              uint64
		Replicas          []int32
		InSync            []int32 `json:"in_sync"`
		Commit, Applied   uint64
		Quiesced          bool
	}
	Queues []struct {
		Queue           string
		Leader          int32
		Term            uint64
		Replicas        []int32
		Commit, Applied uint64
		Quiesced        bool
		Depth           int64
	}
}

func (c *Console) cluster(ctx context.Context, r *http.Request, _ *client.Client) (string, any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://console.internal"+clusterPath, nil)
	if err != nil {
		return "", nil, err
	}
	if ck, err := r.Cookie(tokenCookie); err == nil && ck.Value != "" {
		req.Header.Set("Authorization", "Bearer "+ck.Value)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", nil, err
	}
	var v clusterView
	switch resp.StatusCode {
	case http.StatusOK:
		if err := json.Unmarshal(body, &v); err != nil {
			return "", nil, fmt.Errorf("cluster status: %w", err)
		}
		v.Clustered = true
	case http.StatusNotFound: // not clustered: a single node
	default:
		return "", nil, adminError(resp.StatusCode, body)
	}
	return "cluster", v, nil
}

// adminError turns an admin endpoint's refusal into the error the pages show (and the
// sign-in redirect for a 401).
func adminError(status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	msg := http.StatusText(status)
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	code := connect.CodeInternal
	switch status {
	case http.StatusUnauthorized:
		code = connect.CodeUnauthenticated
	case http.StatusForbidden:
		code = connect.CodePermissionDenied
	}
	return &client.Error{Code: code, Reason: http.StatusText(status), Message: msg}
}
