#!/bin/bash
# profile.sh BINDIR OUTDIR [bench extra flags]: CPU, mutex, block profiles of the server under native W1 and W2.
set -u
BIN=$1; OUT=$2; shift 2
mkdir -p "$OUT"
D=$(mktemp -d /tmp/ns/prof.XXXX)
SLUICE_PPROF_ADDR=127.0.0.1:16061 "$BIN/sluice" serve --data-dir "$D/data" --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 --fsync always >"$D/log" 2>&1 &
P=$!
sleep 3
for w in W1 W2; do
  if [ $w = W1 ]; then args=(produce --size 1024 --in-flight 256 --batch 1); else args=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64); fi
  "$BIN/sluice-bench" "${args[@]}" --duration 14s --count 100000000 --server http://127.0.0.1:18080 --name prof-$w --probe-dir "" --quiet "$@" > "$OUT/bench-$w.txt" 2>&1 &
  B=$!
  sleep 2
  curl -s -o "$D/cpu-$w.pprof" "http://127.0.0.1:16061/debug/pprof/profile?seconds=8" &
  C=$!
  curl -s -o "$D/mutex0-$w.pprof" "http://127.0.0.1:16061/debug/pprof/mutex"; curl -s -o "$D/block0-$w.pprof" "http://127.0.0.1:16061/debug/pprof/block"
  wait $C
  curl -s -o "$D/mutex-$w.pprof" "http://127.0.0.1:16061/debug/pprof/mutex"; curl -s -o "$D/block-$w.pprof" "http://127.0.0.1:16061/debug/pprof/block"
  wait $B
  go tool pprof -top -cum -nodecount=45 "$BIN/sluice" "$D/cpu-$w.pprof" > "$OUT/cpu-$w.txt" 2>&1
  go tool pprof -top -nodecount=30 "$BIN/sluice" "$D/cpu-$w.pprof" > "$OUT/cpu-flat-$w.txt" 2>&1
  go tool pprof -top -nodecount=25 -base "$D/mutex0-$w.pprof" "$BIN/sluice" "$D/mutex-$w.pprof" > "$OUT/mutex-$w.txt" 2>&1
  go tool pprof -top -nodecount=25 -base "$D/block0-$w.pprof" "$BIN/sluice" "$D/block-$w.pprof" > "$OUT/block-$w.txt" 2>&1
done
kill $P; wait $P 2>/dev/null
uptime > "$OUT/uptime.txt"
rm -rf "$D"
