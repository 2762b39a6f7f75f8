package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDescribeACLs lists the users file's rules as Kafka bindings
// (acl_binding.go) matching the filter, grouped by resource. It needs
// describe on the cluster. With authentication off: SECURITY_DISABLED,
// as Kafka answers without an authorizer.
func handleDescribeACLs(_ context.Context, c *conn, req *kmsg.DescribeACLsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := aclFilter{rt: req.ResourceType, name: req.ResourceName, pt: req.ResourcePatternType,
		prin: req.Principal, host: req.Host, op: req.Operation, perm: req.PermissionType}
	switch {
	case c.s.cfg.Auth == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, strp("authentication is off (no --auth-file)")
		return msg(resp)
	case !c.may(auth.Describe, auth.Cluster, ""):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	if err := f.valid(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errMessage(err)
		return msg(resp)
	}
	type key struct {
		rt   kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	at := map[key]int{}
	for _, b := range bindings(c.s.cfg.Auth.Rules()) {
		if !f.matches(b) {
			continue
		}
		rt, name, pt := b.kafkaResource()
		k := key{rt, name, pt}
		i, ok := at[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = rt, name, pt
			i = len(resp.Resources)
			at[k] = i
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.principal(), "*", opToKafka[b.op], b.permission()
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return msg(resp)
}

func strp(s string) *string { return &s }
