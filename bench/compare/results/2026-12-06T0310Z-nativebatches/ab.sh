#!/bin/bash
# ab.sh OUTDIR ROUNDS DUR: W1 (1 KiB, 256 in flight, --fsync always) over Kafka, native
# (StreamService Publish, records) and native with client-built record batches
# (--native-batches), one sluice binary in /tmp/nb/, a fresh data dir per run, the three
# variants' order rotating each round. One JSON per run; server CPU ticks and client CPU per
# run; load average per round. Hold /work/bench.lock around it.
set -u
OUT=$1; ROUNDS=$2; DUR=$3
mkdir -p "$OUT"
W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000)
run() { # variant
  local D; D=$(mktemp -d /tmp/nb/run.XXXX)
  /tmp/nb/sluice serve --data-dir $D/data --http-addr 127.0.0.1:18680 --kafka-addr 127.0.0.1:18681 --sqs-addr 127.0.0.1:18682 --fsync always > $D/log 2>&1 &
  local pid=$!
  for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18680/readyz && break; sleep 0.2; done
  local args=(--protocol kafka)
  case $1 in
    native) args=(--protocol native) ;;
    batches) args=(--protocol native --native-batches) ;;
  esac
  local c0; c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  /usr/bin/time -f "r$r $1 client_cpu_s %U %S" -a -o "$OUT/clientcpu.log" timeout 120 /tmp/nb/sluice-bench "${W1[@]}" "${args[@]}" \
    --server http://127.0.0.1:18680 --kafka-addr 127.0.0.1:18681 --probe-dir "" --quiet -o json --name "w1-$1-r$r" > "$OUT/r$r-$1.json" 2>>"$OUT/errors.log"
  echo "r$r $1 server_cpu_ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - c0 ))" >> "$OUT/cpu.log"
  kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; rm -rf "$D"
}
V=(kafka native batches)
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
  k=$(( (r-1) % 3 ))
  for x in "${V[@]:k}" "${V[@]:0:k}"; do run "$x"; done
done
echo "done $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
