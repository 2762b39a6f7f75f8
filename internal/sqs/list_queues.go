package sqs

import (
	"encoding/base64"
	"sort"
)

func init() { register("ListQueues", handle(listQueues)) }

type listQueuesInput struct {
	QueueNamePrefix string `json:"QueueNamePrefix"`
	NextToken       string `json:"NextToken"`
	MaxResults      *int   `json:"MaxResults"`
}

func (in *listQueuesInput) fromQuery(f form) (err error) {
	in.QueueNamePrefix = f.str("QueueNamePrefix")
	in.NextToken = f.str("NextToken")
	in.MaxResults, err = f.intp("MaxResults")
	return err
}

type listQueuesOutput struct {
	QueueUrls []string `json:"QueueUrls,omitempty" xml:"QueueUrl"`
	NextToken string   `json:"NextToken,omitempty" xml:"NextToken,omitempty"`
}

// maxListResults is SQS's page limit; without MaxResults, ListQueues
// answers at most this many and no token.
const maxListResults = 1000

func listQueues(h *Handler, c *call, in *listQueuesInput) (any, error) {
	names, next, err := page(h.visible(c, h.b.ListQueues(in.QueueNamePrefix)), in.NextToken, in.MaxResults)
	if err != nil {
		return nil, err
	}
	out := listQueuesOutput{NextToken: next}
	for _, n := range names {
		out.QueueUrls = append(out.QueueUrls, h.queueURL(c, n))
	}
	return out, nil
}

// page cuts one page out of sorted names. The token is the last name
// returned, encoded so clients treat it as opaque; a page resumes after it,
// so queues created or deleted between pages neither repeat nor shift it.
func page(names []string, token string, maxResults *int) ([]string, string, error) {
	limit := maxListResults
	if maxResults != nil {
		if *maxResults < 1 || *maxResults > maxListResults {
			return nil, "", invalidValue("MaxResults", *maxResults, "must be between 1 and 1000")
		}
		limit = *maxResults
	}
	if token != "" {
		after, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return nil, "", invalidValue("NextToken", token, "Invalid NextToken value")
		}
		names = names[sort.SearchStrings(names, string(after)+"\x00"):]
	}
	if len(names) <= limit {
		return names, "", nil
	}
	names = names[:limit]
	if maxResults == nil {
		return names, "", nil
	}
	return names, base64.RawURLEncoding.EncodeToString([]byte(names[limit-1])), nil
}
