package testproc

import (
	"os"
	"testing"
)

// AllowMissingEnv names the variable that lets a test whose real client
// (kcat, the AWS CLI, a Python library, curl, openssl) is not installed
// skip instead of fail. `make test` installs every client first
// (scripts/test-deps.sh), so by default a missing one is a failure: a
// suite that silently skips its interop tests proves nothing.
const AllowMissingEnv = "SLUICE_ALLOW_MISSING_CLIENTS"

// Missing reports that a test's client is not installed: the test fails
// with msg (which should say how to install it), or skips with it when
// SLUICE_ALLOW_MISSING_CLIENTS=1.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(AllowMissingEnv) == "1" {
		t.Skip(msg + " (skipped: " + AllowMissingEnv + "=1)")
	}
	t.Fatal(msg + "; `make deps` (scripts/test-deps.sh) installs it, or set " + AllowMissingEnv + "=1 to skip")
}
