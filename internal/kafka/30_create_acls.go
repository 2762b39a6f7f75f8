package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleCreateACLs adds rules to the users file, one per binding (a
// binding the file already grants is not added twice), written
// atomically; the store reloads at once, so the next request sees them.
// It needs alter on the cluster. Each creation is answered on its own:
// INVALID_REQUEST for one sluice cannot express, SECURITY_DISABLED with
// authentication off or a users file that cannot be written.
func handleCreateACLs(_ context.Context, c *conn, req *kmsg.CreateACLsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	fail := func(code int16, err error) (reply, error) {
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, errMessage(err)
			}
		}
		return msg(resp)
	}
	if code, err := c.aclAdmin(); code != 0 {
		return fail(code, err)
	}
	var add []binding
	for i, cr := range req.Creations {
		b, err := bindingOf(cr)
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, errMessage(err)
			continue
		}
		add = append(add, b)
	}
	err := c.s.editACLs(func(rules []auth.Rule) []auth.Rule {
		have := bindings(rules)
		for _, b := range add {
			if slices.Contains(have, b) {
				continue
			}
			have = append(have, b)
			r := auth.Rule{User: b.user, Resources: []auth.Pattern{auth.Pattern(b.pattern)}}
			if b.deny {
				r.Deny = []auth.Operation{b.op}
			} else {
				r.Allow = []auth.Operation{b.op}
			}
			rules = append(rules, r)
		}
		return rules
	})
	if err != nil {
		return fail(kerr.UnknownServerError.Code, err)
	}
	return msg(resp)
}

// errNoUsersFile: ACLs cannot be edited without a file to write.
var errNoUsersFile = errors.New("no users file to write (authentication is off, or the store is static)")

// aclAdmin checks that ACLs may be edited: a users file, and alter on the
// cluster.
func (c *conn) aclAdmin() (int16, error) {
	switch {
	case c.s.cfg.Auth.Path() == "":
		return kerr.SecurityDisabled.Code, errNoUsersFile
	case !c.may(auth.Alter, auth.Cluster, ""):
		return kerr.ClusterAuthorizationFailed.Code, fmt.Errorf("%s may not alter the cluster's ACLs", c.sasl.principal)
	}
	return 0, nil
}

// editACLs rewrites the users file's rules with edit through auth.Edit
// (under the file's lock, so a `sluice user|acl` run or an SQS
// AddPermission at the same moment takes turns with it), then reloads the
// store so the next request sees the change. The file is read fresh, not
// from the store's copy, so users, keys and tokens are written back as
// they are, except that a clear-text password or token is stored salted
// or hashed, as every edit does.
func (s *Server) editACLs(edit func([]auth.Rule) []auth.Rule) error {
	err := auth.Edit(s.cfg.Auth.Path(), func(f *auth.File) error {
		f.ACLs = edit(slices.Clone(f.ACLs))
		return nil
	})
	if err != nil {
		return err
	}
	return s.cfg.Auth.Reload()
}
