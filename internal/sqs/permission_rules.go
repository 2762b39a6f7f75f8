package sqs

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/internal/auth"
)

// The users-file side of AddPermission and RemovePermission. An
// AWSAccountId names who receives the permission, in the users file's
// terms: a user name, an access key id (meaning the key's owner), or "*"
// (every authenticated user). One sluice is one AWS account, so a
// 12-digit account number names nobody and is refused.

// addRules grants in.Actions on queue to each of in.AWSAccountIDs, one
// rule per user, labelled in.Label.
func (h *Handler) addRules(queue string, in *addPermissionInput) error {
	ops, err := permissionOps(in.Actions)
	if err != nil {
		return err
	}
	return h.editRules(func(f *auth.File) error {
		if slices.ContainsFunc(f.ACLs, func(r auth.Rule) bool { return isLabelled(r, queue, in.Label) }) {
			return invalidValue("Label", in.Label, "Already exists")
		}
		var users []string
		for _, id := range in.AWSAccountIDs {
			u, err := grantee(f, id)
			if err != nil {
				return err
			}
			if !slices.Contains(users, u) {
				users = append(users, u)
			}
		}
		for _, u := range users {
			f.ACLs = append(f.ACLs, auth.Rule{User: u, Allow: slices.Clone(ops),
				Resources: []auth.Pattern{auth.Pattern("queue:" + queue)}, Label: in.Label})
		}
		return nil
	})
}

// grantee is the user an AWSAccountId names.
func grantee(f *auth.File, id string) (string, error) {
	if id == "*" || f.User(id) != nil {
		return id, nil
	}
	for _, u := range f.Users {
		for _, k := range u.AccessKeys {
			if k.ID == id {
				return u.Name, nil
			}
		}
	}
	return "", invalidValue("AWSAccountIds", id, "names no user or access key in the users file")
}

// errUnchanged is what an edit returns to leave the file as it is.
var errUnchanged = errors.New("no change")

// editRules applies edit to the users file through auth.Edit (under the
// file's lock, hardened, written atomically), then has the store reread
// it, so the caller's next request already sees the change. An edit by
// `sluice acl` at the same instant takes its turn instead of being lost.
func (h *Handler) editRules(edit func(*auth.File) error) error {
	path := h.cfg.Auth.Path()
	if path == "" {
		return newError(errInvalidAction, "Permissions cannot be changed: this server's users are not kept in a file.")
	}
	err := auth.Edit(path, edit)
	var ae *apiError
	switch {
	case errors.Is(err, errUnchanged):
		return nil
	case errors.As(err, &ae):
		return ae
	case err != nil:
		return newError(errInternal, "editing the users file: %v", err)
	}
	if err := h.cfg.Auth.Reload(); err != nil {
		return newError(errInternal, "%v", fmt.Errorf("rereading the users file: %w", err))
	}
	return nil
}

// dropQueueRules removes every rule AddPermission wrote for a deleted
// queue, so a queue created later under the same name does not inherit
// them (an SQS policy is deleted with its queue). Rules written by hand
// stay.
func (h *Handler) dropQueueRules(queue string) {
	if h.cfg.Auth.Path() == "" {
		return
	}
	err := h.editRules(func(f *auth.File) error {
		if !dropLabelled(f, queue, "") {
			return errUnchanged
		}
		return nil
	})
	if err != nil {
		h.log.Warn("sqs: could not remove a deleted queue's permissions from the users file", "queue", queue, "err", err)
	}
}
