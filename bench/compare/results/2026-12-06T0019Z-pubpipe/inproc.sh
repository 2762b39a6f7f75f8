#!/bin/bash
# in-process client+server CPU profiles of W1 native and W1 Kafka (cmd/sluice-bench TestBenchProfile)
cd /tmp/pub/inproc
for w in W1-native W1; do
  SLUICE_BENCH_PROFILE=$w timeout 120 /tmp/pub/benchprof.test -test.run TestBenchProfile -test.v -test.cpuprofile cpu-$w.out > out-$w.txt 2>&1
  go tool pprof -top -nodecount=50 /tmp/pub/benchprof.test cpu-$w.out > flat-$w.txt 2>&1
  go tool pprof -top -cum -nodecount=80 /tmp/pub/benchprof.test cpu-$w.out > cum-$w.txt 2>&1
done
uptime > uptime.txt
