package sqs_test

import (
	"os"
	"testing"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestMain links cmd/sluice once for the package's tests that run it
// (testproc.Main), not once per test.
func TestMain(m *testing.M) { os.Exit(testproc.Main(m)) }
