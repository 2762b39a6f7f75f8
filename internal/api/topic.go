package api

import (
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// topicService implements sluice.v1.TopicService. Until the broker has
// topics, every call answers `unimplemented`.
type topicService struct {
	*API
	sluicev1connect.UnimplementedTopicServiceHandler
}

// groupService implements sluice.v1.GroupService. Until the broker has
// consumer groups, every call answers `unimplemented`.
type groupService struct {
	*API
	sluicev1connect.UnimplementedGroupServiceHandler
}
