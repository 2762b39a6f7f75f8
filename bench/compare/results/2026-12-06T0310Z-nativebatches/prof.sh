#!/bin/bash
# prof.sh OUT VARIANT: a 8 s CPU profile of sluice serve under W1 (VARIANT kafka|native|batches)
OUT=$1; V=$2
D=$(mktemp -d /tmp/nb/prof.XXXX)
SLUICE_PPROF_ADDR=127.0.0.1:18690 /tmp/nb/sluice serve --data-dir $D/data --http-addr 127.0.0.1:18680 --kafka-addr 127.0.0.1:18681 --sqs-addr 127.0.0.1:18682 --fsync always > $D/log 2>&1 &
pid=$!
for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18680/readyz && break; sleep 0.2; done
args=(--protocol kafka)
case $V in native) args=(--protocol native);; batches) args=(--protocol native --native-batches);; esac
timeout 60 /tmp/nb/sluice-bench produce --size 1024 --in-flight 256 --batch 1 --duration 14s --count 100000000 "${args[@]}" --server http://127.0.0.1:18680 --kafka-addr 127.0.0.1:18681 --probe-dir "" --quiet > /dev/null 2>&1 &
b=$!
sleep 4
curl -s -o $OUT.pprof "http://127.0.0.1:18690/debug/pprof/profile?seconds=8"
wait $b
kill $pid; while kill -0 $pid 2>/dev/null; do sleep 0.1; done; rm -rf $D
