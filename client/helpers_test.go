package client_test

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
