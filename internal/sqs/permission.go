package sqs

import (
	"encoding/json"
	"slices"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

func init() {
	register("AddPermission", handle(addPermission))
	register("RemovePermission", handle(removePermission))
}

// With authentication on (a users file), AddPermission and
// RemovePermission edit that file's rules (permission_rules.go): each
// AWSAccountId becomes a rule for one user, scoped to exactly this queue
// and carrying the Label. With authentication off there is nobody to grant
// anything to, so the permission is kept with the queue
// (QueueSettings.Extra, under "sqs.permission.<label>") for clients that
// add and remove them, and not enforced.
const extraPermissionPrefix = "sqs.permission."

type addPermissionInput struct {
	QueueURL      string   `json:"QueueUrl"`
	Label         string   `json:"Label"`
	AWSAccountIDs []string `json:"AWSAccountIds"`
	Actions       []string `json:"Actions"`
}

func (in *addPermissionInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	in.Label = f.str("Label")
	in.AWSAccountIDs = f.list("AWSAccountId")
	in.Actions = f.list("ActionName")
	return nil
}

func addPermission(h *Handler, c *call, in *addPermissionInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	switch {
	case in.Label == "":
		return nil, missing("Label")
	case !batchIDRE.MatchString(in.Label):
		return nil, invalidValue("Label", in.Label, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	case len(in.AWSAccountIDs) == 0:
		return nil, missing("AWSAccountIds")
	case len(in.Actions) == 0:
		return nil, missing("Actions")
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	if h.cfg.Auth != nil {
		return nil, h.addRules(name, in)
	}
	if _, ok := s.Extra[extraPermissionPrefix+in.Label]; ok {
		return nil, invalidValue("Label", in.Label, "Already exists")
	}
	v, _ := json.Marshal(struct {
		Accounts []string `json:"accounts"`
		Actions  []string `json:"actions"`
	}{in.AWSAccountIDs, in.Actions})
	_, err = h.b.UpdateQueue(name, func(s *broker.QueueSettings) {
		if s.Extra == nil {
			s.Extra = map[string]string{}
		}
		s.Extra[extraPermissionPrefix+in.Label] = string(v)
	})
	return nil, toNilError(err)
}

type removePermissionInput struct {
	QueueURL string `json:"QueueUrl"`
	Label    string `json:"Label"`
}

func (in *removePermissionInput) fromQuery(f form) error {
	in.QueueURL = f.str("QueueUrl")
	in.Label = f.str("Label")
	return nil
}

func removePermission(h *Handler, c *call, in *removePermissionInput) (any, error) {
	name, err := h.queueFor(c, in.QueueURL)
	if err != nil {
		return nil, err
	}
	if in.Label == "" {
		return nil, missing("Label")
	}
	s, err := h.b.GetQueue(name)
	if err != nil {
		return nil, toAPIError(err)
	}
	if h.cfg.Auth != nil {
		return nil, h.editRules(func(f *auth.File) error {
			if !dropLabelled(f, name, in.Label) {
				return invalidValue("Label", in.Label, "Does not exist")
			}
			return nil
		})
	}
	if _, ok := s.Extra[extraPermissionPrefix+in.Label]; !ok {
		return nil, invalidValue("Label", in.Label, "Does not exist")
	}
	_, err = h.b.UpdateQueue(name, func(s *broker.QueueSettings) {
		delete(s.Extra, extraPermissionPrefix+in.Label)
	})
	return nil, toNilError(err)
}

// permissionOps maps AddPermission's ActionName values to operations:
// "*" is every operation, an action name the operation it needs
// (actionOps); SQS's "SendMessage" also grants SendMessageBatch, and so
// on, since both need the same operation.
func permissionOps(actions []string) ([]auth.Operation, error) {
	var ops []auth.Operation
	for _, a := range actions {
		op, ok := actionOps[a]
		if a == "*" {
			op, ok = auth.All, true
		}
		if !ok {
			return nil, invalidValue("ActionName", a, "not an SQS action that can be granted on a queue")
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// isLabelled reports whether rule r is one AddPermission wrote for label
// on queue.
func isLabelled(r auth.Rule, queue, label string) bool {
	return r.Label != "" && (label == "" || r.Label == label) &&
		len(r.Resources) == 1 && r.Resources[0] == auth.Pattern("queue:"+queue)
}

// dropLabelled removes the rules of label on queue (every label's, when
// label is ""), reporting whether there were any.
func dropLabelled(f *auth.File, queue, label string) bool {
	n := len(f.ACLs)
	f.ACLs = slices.DeleteFunc(f.ACLs, func(r auth.Rule) bool { return isLabelled(r, queue, label) })
	return len(f.ACLs) != n
}
