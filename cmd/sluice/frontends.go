package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/sqs"
)

// registerFrontends attaches the protocol front-ends to their listeners once
// the broker is open.
func registerFrontends(s *server.Server, b *broker.Broker) error {
	if err := registerKafka(s, b); err != nil {
		return err
	}
	registerSQS(s, b)
	return nil
}

// registerSQS serves the SQS API (JSON 1.0 and query) on the sqs listener.
func registerSQS(s *server.Server, b *broker.Broker) {
	url := ""
	if adv := s.Config().SQSAdvertisedAddr; adv != "" {
		url = "http://" + adv
	}
	h := sqs.NewHandler(b, sqs.Config{AdvertisedURL: url, Logger: s.Logger()})
	s.RegisterFrontend(server.SQS, &httpFrontend{srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// No write timeout: a ReceiveMessage long poll may wait 20 s.
	}})
}

// httpFrontend runs an HTTP handler as a server front-end.
type httpFrontend struct{ srv *http.Server }

func (f *httpFrontend) Serve(ln net.Listener) error {
	if err := f.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (f *httpFrontend) Shutdown(ctx context.Context) error { return f.srv.Shutdown(ctx) }
