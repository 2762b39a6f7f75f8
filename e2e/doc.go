// Package e2e holds sluice's end-to-end tests: they build the real binary,
// start it on free loopback ports with a temporary data directory, and
// drive it through the Go client, the CLI and curl, as a user would (the
// README tour verbatim, SIGTERM under load, /metrics).
//
// It owns no production code and must never be imported.
package e2e
