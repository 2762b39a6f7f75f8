package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

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
	var v clusterView
	switch status, err := c.adminGet(ctx, r, clusterPath, &v); {
	case status == http.StatusNotFound: // not clustered: a single node
	case err != nil:
		return "", nil, err
	default:
		v.Clustered = true
	}
	return "cluster", v, nil
}

// adminGet reads one of the node's admin endpoints in-process with the browser's token
// and decodes its JSON answer into v. A refusal is an error the pages show (a 401 sends
// the browser to sign in); the status is returned for callers that give one a meaning.
func (c *Console) adminGet(ctx context.Context, r *http.Request, path string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://console.internal"+path, nil)
	if err != nil {
		return 0, err
	}
	if ck, err := r.Cookie(tokenCookie); err == nil && ck.Value != "" {
		req.Header.Set("Authorization", "Bearer "+ck.Value)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, adminError(resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, fmt.Errorf("%s: %w", path, err)
	}
	return resp.StatusCode, nil
}

// adminError turns an admin endpoint's refusal into the error the pages show (and the
// sign-in redirect for a 401).
func adminError(status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	msg := http.StatusText(status)
	switch text := strings.TrimSpace(string(body)); {
	case json.Unmarshal(body, &e) == nil && e.Error != "":
		msg = e.Error
	case text != "" && len(text) < 512 && !strings.ContainsAny(text, "<{"):
		// the authorization guard's plain-text refusal ("permission_denied: mailer may
		// not describe cluster"): it says who may not do what, which "Forbidden" does not
		msg = text
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

const nodePath = "/v1/admin/node"

// nodeHealth is the part of /v1/admin/node (`sluice admin node`) the overview shows:
// disk headroom and fdatasync latency since the node started.
type nodeHealth struct {
	DiskFreeBytes uint64 `json:"disk_free_bytes"`
	DiskSizeBytes uint64 `json:"disk_size_bytes"`
	WriteFailure  string `json:"write_failure"`
	Fsync         struct {
		Count      uint64  `json:"count"`
		P50Seconds float64 `json:"p50_seconds"`
		P99Seconds float64 `json:"p99_seconds"`
	} `json:"fsync"`
}

// FreePercent is the disk's free share, -1 when not known.
func (h *nodeHealth) FreePercent() float64 {
	if h.DiskSizeBytes == 0 {
		return -1
	}
	return 100 * float64(h.DiskFreeBytes) / float64(h.DiskSizeBytes)
}

// nodeHealth reads the node's health for the overview; nil when the endpoint refuses (a
// token without describe on the cluster still sees its queues and topics).
func (c *Console) nodeHealth(ctx context.Context, r *http.Request) *nodeHealth {
	var h nodeHealth
	if _, err := c.adminGet(ctx, r, nodePath, &h); err != nil {
		return nil
	}
	return &h
}
