package console

import (
	"context"
	"net/http"

	"github.com/sluice-mq/sluice/client"
)

// The users page reads /v1/admin/users (what `sluice admin users` reads): the users of
// the --auth-file in force, which kinds of credentials each has, and the access rules.
// Never a secret: the endpoint gives none. Users are changed by editing the file (`sluice
// user`, `sluice acl`), which the server reloads; the page says so rather than offering
// forms that would write a file the operator owns.

const usersPath = "/v1/admin/users"

type usersView struct {
	Enabled  bool   // false: authentication is off (the endpoint answered 404)
	AuthFile string `json:"auth_file"`
	Users    []struct {
		Name         string   `json:"name"`
		Password     string   `json:"password"`
		Tokens       int      `json:"tokens"`
		AccessKeyIDs []string `json:"access_key_ids"`
	} `json:"users"`
	Rules []struct {
		User      string   `json:"user"`
		Allow     []string `json:"allow"`
		Deny      []string `json:"deny"`
		Resources []string `json:"resources"`
		Label     string   `json:"label"`
	} `json:"rules"`
}

func (c *Console) users(ctx context.Context, r *http.Request, _ *client.Client) (string, any, error) {
	var v usersView
	switch status, err := c.adminGet(ctx, r, usersPath, &v); {
	case status == http.StatusNotFound: // authentication off
	case err != nil:
		return "", nil, err
	default:
		v.Enabled = true
	}
	return "users", v, nil
}
