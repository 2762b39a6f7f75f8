#!/bin/bash
# profile.sh BINDIR OUTDIR: CPU, mutex, block profiles of the server under W1 native and W1 kafka; bench output too.
set -u
BIN=$1; OUT=$2
mkdir -p "$OUT"
D=$(mktemp -d /tmp/pub/prof.XXXX)
SLUICE_PPROF_ADDR=127.0.0.1:16161 "$BIN/sluice" serve --data-dir "$D/data" --http-addr 127.0.0.1:18480 --kafka-addr 127.0.0.1:18481 --sqs-addr 127.0.0.1:18482 --fsync always >"$D/log" 2>&1 &
P=$!
for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18480/readyz && break; sleep 0.2; done
for proto in native kafka; do
  timeout 60 "$BIN/sluice-bench" produce --size 1024 --in-flight 256 --batch 1 --duration 14s --count 100000000 --protocol $proto --server http://127.0.0.1:18480 --kafka-addr 127.0.0.1:18481 --name prof-$proto --probe-dir "" --quiet > "$OUT/bench-$proto.txt" 2>&1 &
  B=$!
  sleep 2
  curl -s -o "$D/cpu-$proto.pprof" "http://127.0.0.1:16161/debug/pprof/profile?seconds=8" &
  C=$!
  curl -s -o "$D/mutex0-$proto.pprof" "http://127.0.0.1:16161/debug/pprof/mutex"; curl -s -o "$D/block0-$proto.pprof" "http://127.0.0.1:16161/debug/pprof/block"
  wait $C
  curl -s -o "$D/mutex-$proto.pprof" "http://127.0.0.1:16161/debug/pprof/mutex"; curl -s -o "$D/block-$proto.pprof" "http://127.0.0.1:16161/debug/pprof/block"
  wait $B
  cp "$D/cpu-$proto.pprof" "$OUT/"
  go tool pprof -top -cum -nodecount=60 "$BIN/sluice" "$D/cpu-$proto.pprof" > "$OUT/cpu-$proto.txt" 2>&1
  go tool pprof -top -nodecount=40 "$BIN/sluice" "$D/cpu-$proto.pprof" > "$OUT/cpu-flat-$proto.txt" 2>&1
  go tool pprof -top -nodecount=25 -base "$D/mutex0-$proto.pprof" "$BIN/sluice" "$D/mutex-$proto.pprof" > "$OUT/mutex-$proto.txt" 2>&1
  go tool pprof -top -nodecount=25 -base "$D/block0-$proto.pprof" "$BIN/sluice" "$D/block-$proto.pprof" > "$OUT/block-$proto.txt" 2>&1
  curl -s http://127.0.0.1:18480/metrics | grep -i 'fsync\|commit_batch' | grep -v '^#' > "$OUT/metrics-$proto.txt"
done
kill $P; wait $P 2>/dev/null
uptime > "$OUT/uptime.txt"
rm -rf "$D"
