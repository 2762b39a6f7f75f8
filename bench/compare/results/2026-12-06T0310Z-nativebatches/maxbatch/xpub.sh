#!/bin/bash
OUT=$1; ROUNDS=$2
mkdir -p $OUT
run() { # label env...
  local label=$1; shift
  local D; D=$(mktemp -d /tmp/nb/run.XXXX)
  /tmp/nb/sluice serve --data-dir $D/data --http-addr 127.0.0.1:18680 --kafka-addr 127.0.0.1:18681 --sqs-addr 127.0.0.1:18682 --fsync always > $D/log 2>&1 &
  local pid=$!
  for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18680/readyz && break; sleep 0.2; done
  local proto=(--protocol native --native-batches); [ "$label" = kafka ] && proto=(--protocol kafka)
  env "$@" timeout 120 /tmp/nb/sluice-bench-x produce --size 1024 --in-flight 256 --batch 1 --duration 10s --count 100000000 "${proto[@]}" \
    --server http://127.0.0.1:18680 --kafka-addr 127.0.0.1:18681 --probe-dir "" --quiet -o json --name "x-$label-r$r" > "$OUT/r$r-$label.json" 2>>"$OUT/errors.log"
  kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; rm -rf "$D"
}
for r in $(seq 1 $ROUNDS); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
  run batch64 XPUB_BATCH=64
  run default X=1
  run batch128 XPUB_BATCH=128
  run kafka X=1
  run batch256 XPUB_BATCH=256
done
