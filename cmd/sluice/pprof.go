package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
)

// pprofEnv names a host:port (loopback only) where `sluice serve` serves Go's
// /debug/pprof, with block and mutex profiling on: for benchmarks run by hand
// (bench/cluster/run.sh profiles a cluster's leader through it). Not a flag: it is
// no operator's knob, and block profiling costs every blocking call a little.
const pprofEnv = "SLUICE_PPROF_ADDR"

// startPprof serves /debug/pprof on addr if it is set; the listener lives as long as the
// process.
func startPprof(addr string, logw io.Writer) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", pprofEnv, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: %q is not a loopback address: profiles are not for the network", pprofEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", pprofEnv, err)
	}
	runtime.SetBlockProfileRate(10_000) // one blocking event per 10 µs blocked, sampled
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	fmt.Fprintf(logw, "%s: profiles on http://%s/debug/pprof/\n", pprofEnv, ln.Addr())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
