#!/bin/bash
# compare.sh OUTDIR ROUNDS DUR: interleaved A (main's binaries, unary native calls) / B (this branch, streams) / Redis always,
# native W1 W2 W3 and Kafka W1 on each sluice. One JSON per run in OUTDIR.
set -u
OUT=$1; ROUNDS=$2; DUR=$3
mkdir -p "$OUT"
W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000)
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count 100000000)
W3=(latency --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration "$DUR" --count 100000000)
sl() { # label bindir
  local D; D=$(/tmp/ns/serve.sh "$2" 18280); local pid; pid=$(cat /tmp/ns/pid.18280)
  local S=(--server http://127.0.0.1:18280 --kafka-addr 127.0.0.1:18281 --probe-dir "" --quiet -o json)
  for w in W1 W2 W3; do
    local -n args=$w
    "$2/sluice-bench" "${args[@]}" --protocol native "${S[@]}" --name "b-$w" > "$OUT/r$r-$1-native-$w.json" 2>>"$OUT/errors.log"
  done
  "$2/sluice-bench" "${W1[@]}" --protocol kafka "${S[@]}" --name b-k1 > "$OUT/r$r-$1-kafka-W1.json" 2>>"$OUT/errors.log"
  kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; rm -rf "$D"
}
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date -u +%T) $(uptime)" >> "$OUT/uptime.log"
  sl old /tmp/ns/old
  sl new /tmp/ns/new
  RD=$(mktemp -d /tmp/ns/redis.XXXX)
  redis-server --bind 127.0.0.1 --port 18390 --dir "$RD" --appendonly yes --appendfsync always --save "" --daemonize no --protected-mode yes > "$RD/log" 2>&1 &
  RP=$!; sleep 1
  for w in W1 W2 W3; do
    declare -n args=$w
    /tmp/ns/peerbench run --workload "${args[0]}" "${args[@]:1}" --peer redis --addr 127.0.0.1:18390 --label "redis always" --name "b-$w" --quiet > "$OUT/r$r-redis-resp-$w.json" 2>>"$OUT/errors.log"
    unset -n args
  done
  kill "$RP"; wait "$RP" 2>/dev/null; rm -rf "$RD"
done
echo "done $(date -u +%T) $(uptime)" >> "$OUT/uptime.log"
