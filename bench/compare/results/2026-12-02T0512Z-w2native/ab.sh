#!/bin/bash
# ab.sh OUTDIR ROUNDS DUR [labels...]: interleaved native W2 on each sluice build in /tmp/w2n/<label>/ and
# Redis appendfsync always (peerbench), one JSON per run, load average per round, disk probe at start and end.
set -u
OUT=$1; ROUNDS=$2; DUR=$3; shift 3
LABELS=("$@"); [ ${#LABELS[@]} -eq 0 ] && LABELS=(old new)
mkdir -p "$OUT"
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count 100000000)
probe() { local d; d=$(mktemp -d /tmp/w2n/probe.XXXX); /tmp/w2n/peerbench probe --dir "$d" >> "$OUT/disk.txt" 2>&1; rm -rf "$d"; }
sl() { # label
  local D; D=$(mktemp -d /tmp/w2n/run.XXXX)
  /tmp/w2n/$1/sluice serve --data-dir $D/data --http-addr 127.0.0.1:18280 --kafka-addr 127.0.0.1:18281 --sqs-addr 127.0.0.1:18282 --fsync always > $D/log 2>&1 &
  local pid=$!
  for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18280/readyz && break; sleep 0.2; done
  local c0; c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  /tmp/w2n/$1/sluice-bench "${W2[@]}" --protocol native --server http://127.0.0.1:18280 --probe-dir "" --quiet -o json --name b-W2 > "$OUT/r$r-$1-W2.json" 2>>"$OUT/errors.log"
  echo "r$r $1 server_cpu_ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - c0 ))" >> "$OUT/cpu.log"
  kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; rm -rf "$D"
}
rd() {
  local RD; RD=$(mktemp -d /tmp/w2n/redis.XXXX)
  redis-server --bind 127.0.0.1 --port 18390 --dir "$RD" --appendonly yes --appendfsync always --save "" --daemonize no --protected-mode yes > "$RD/log" 2>&1 &
  local RP=$!; sleep 1
  /tmp/w2n/peerbench run --workload queue "${W2[@]:1}" --peer redis --addr 127.0.0.1:18390 --label "redis always" --name b-W2 --quiet > "$OUT/r$r-redis-W2.json" 2>>"$OUT/errors.log"
  kill "$RP"; wait "$RP" 2>/dev/null; rm -rf "$RD"
}
probe
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
  # rotate the order each round so no build always runs first
  order=("${LABELS[@]}" redis); n=${#order[@]}; k=$(( (r-1) % n ))
  for x in "${order[@]:k}" "${order[@]:0:k}"; do
    if [ "$x" = redis ]; then rd; else sl "$x"; fi
  done
done
echo "done $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
probe
