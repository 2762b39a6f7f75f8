package main

import (
	"context"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// mountAPIStubs serves the native API's procedures with the generated
// "unimplemented" handlers until internal/api wires them to the broker. It
// keeps the URL space honest meanwhile: a well-formed call gets Connect's
// `unimplemented` error, a malformed one `invalid_argument`, never a bare
// 404 — so docs/api.md's curl examples can be checked today.
func mountAPIStubs(_ context.Context, s *server.Server) error {
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(int(s.Config().MaxRequestBytes))}
	s.RegisterHTTP(sluicev1connect.NewQueueServiceHandler(sluicev1connect.UnimplementedQueueServiceHandler{}, opts...))
	s.RegisterHTTP(sluicev1connect.NewDeadLetterServiceHandler(sluicev1connect.UnimplementedDeadLetterServiceHandler{}, opts...))
	s.RegisterHTTP(sluicev1connect.NewTopicServiceHandler(sluicev1connect.UnimplementedTopicServiceHandler{}, opts...))
	s.RegisterHTTP(sluicev1connect.NewGroupServiceHandler(sluicev1connect.UnimplementedGroupServiceHandler{}, opts...))
	return nil
}
