// Package chaos is sluice's adversarial suite: the real binary, started as
// `sluice serve` on free loopback ports, attacked from the outside the way
// issue 13 found it breaking. Each test prints its figures (t.Logf, shown
// with -v).
//
// The network tests (net_*_test.go) cover what connections can do to the
// server: file-descriptor exhaustion under a lowered RLIMIT_NOFILE, more
// connections than a listener's cap, idle Kafka connections, slowloris on
// headers and bodies, and request smuggling through an over-limit body.
//
// kill_test.go kills the binary (SIGKILL) at a random moment under load
// over the native API, SQS and Kafka at once, restarts it on the same data,
// and checks: nothing acknowledged lost, nothing delivered after its delete
// was confirmed, duplicates counted. disk_full_test.go fills a real tmpfs
// (root only) and checks each protocol's answer, /readyz and recovery.
//
// Every test runs in a short form in CI (a few seconds each). Set
// SLUICE_CHAOS_LONG=1 for the long form, at the sizes the issue measured
// (1,100 connections under ulimit -n 1024).
//
// It owns no production code and must never be imported.
package chaos
