package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions lists the apis table. Clients pick, per API, the
// highest version both sides support.
func handleApiVersions(_ context.Context, _ *conn, req *kmsg.ApiVersionsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionList()
	return msg(resp)
}

// apiVersionsUnsupported answers a too-new ApiVersions request in v0 form,
// which every client can read, listing what we serve so it retries lower.
func apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiVersionList()
	return resp
}

func apiVersionList() []kmsg.ApiVersionsResponseApiKey {
	keys := sortedKeys()
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		a := apis[k]
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	return out
}
