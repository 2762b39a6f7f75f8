// Package e2e holds the cluster's end-to-end tests: real `sluice serve` processes on
// loopback, driven by real clients (franz-go; aws-sdk-go-v2 for SQS queues), killed with
// SIGKILL at whatever moment they are in and restarted, with a checker that every
// acknowledged record or message survived (and, for queues, that nothing deleted comes back).
//
// It has no code of its own outside its tests, and nothing may import it.
package e2e
