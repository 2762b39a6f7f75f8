package sqs

import (
	"encoding/xml"
	"regexp"
)

// Batch actions share these rules: 1 to 10 entries, each with a distinct id
// of letters, digits, '-' and '_' (at most 80). Those are checked for the
// whole request; everything else fails one entry, in Failed[], with HTTP 200.

const maxBatchEntries = 10

var batchIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func checkBatchIDs(action string, ids []string) error {
	if len(ids) == 0 {
		return newError(errEmptyBatch, "There should be at least one %sRequestEntry in the request.", action)
	}
	if len(ids) > maxBatchEntries {
		return newError(errTooManyEntries, "Maximum number of entries per request are %d. You have sent %d.", maxBatchEntries, len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !batchIDRE.MatchString(id) {
			return newError(errInvalidBatchID, "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[id] {
			return newError(errIdsNotDistinct, "Id %s repeated.", id)
		}
		seen[id] = true
	}
	return nil
}

// batchError is one failed entry (BatchResultErrorEntry).
type batchError struct {
	XMLName     xml.Name `json:"-" xml:"BatchResultErrorEntry"`
	ID          string   `json:"Id" xml:"Id"`
	SenderFault bool     `json:"SenderFault" xml:"SenderFault"`
	Code        string   `json:"Code" xml:"Code"`
	Message     string   `json:"Message,omitempty" xml:"Message,omitempty"`
}

func failedEntry(id string, err error) batchError {
	ae := toAPIError(err)
	return batchError{ID: id, SenderFault: ae.kind.sender, Code: ae.kind.code, Message: ae.message}
}

// batchID is a successful entry of the delete and visibility batches.
type batchID struct {
	ID string `json:"Id" xml:"Id"`
}
