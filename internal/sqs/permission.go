package sqs

import (
	"encoding/json"

	"github.com/sluice-mq/sluice/internal/broker"
)

func init() {
	register("AddPermission", handle(addPermission))
	register("RemovePermission", handle(removePermission))
}

// Permissions are stored with the queue (QueueSettings.Extra, under
// "sqs.permission.<label>") so a client that adds and removes them works,
// but sluice does not enforce them: it has no identities to check.
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
	name, err := c.queueName(in.QueueURL)
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
	name, err := c.queueName(in.QueueURL)
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
	if _, ok := s.Extra[extraPermissionPrefix+in.Label]; !ok {
		return nil, invalidValue("Label", in.Label, "Does not exist")
	}
	_, err = h.b.UpdateQueue(name, func(s *broker.QueueSettings) {
		delete(s.Extra, extraPermissionPrefix+in.Label)
	})
	return nil, toNilError(err)
}
