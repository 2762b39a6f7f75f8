#!/bin/bash
# w2.sh OUTDIR ROUNDS DUR: W2 (queue round trip) native sluice vs Redis appendfsync always, alternating
set -u
OUT=$1; ROUNDS=$2; DUR=$3
mkdir -p "$OUT"
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count 100000000)
run() {
  if [ "$1" = redis ]; then
    local d; d=$(mktemp -d /tmp/w3/redis.XXXX)
    redis-server --bind 127.0.0.1 --port 18683 --dir "$d" --appendonly yes --appendfsync always --save "" --daemonize no --protected-mode yes > "$d/log" 2>&1 &
    local rp=$!
    for i in $(seq 1 100); do redis-cli -p 18683 ping >/dev/null 2>&1 && break; sleep 0.1; done
    timeout 120 /tmp/w3/peerbench run --workload queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" \
      --count 100000000 --peer redis --addr 127.0.0.1:18683 --label "redis (always)" --name "w2-redis-r$r" > "$OUT/r$r-redis.json" 2>>"$OUT/errors.log"
    kill "$rp"; while kill -0 "$rp" 2>/dev/null; do sleep 0.1; done; rm -rf "$d"
    return
  fi
  local D; D=$(mktemp -d /tmp/w3/run.XXXX)
  ${SLUICE:-/tmp/w3/sluice} serve --data-dir $D/data --http-addr 127.0.0.1:18680 --kafka-addr 127.0.0.1:18681 --sqs-addr 127.0.0.1:18682 --fsync always > $D/log 2>&1 &
  local pid=$!
  for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18680/readyz && break; sleep 0.2; done
  local c0; c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  /usr/bin/time -f "r$r $1 client_cpu_s %U %S" -a -o "$OUT/clientcpu.log" timeout 120 /tmp/w3/sluice-bench "${W2[@]}" --protocol native $EXTRA \
    --server http://127.0.0.1:18680 --probe-dir "" --quiet -o json --name "w2-$1-r$r" > "$OUT/r$r-$1.json" 2>>"$OUT/errors.log"
  echo "r$r $1 server_cpu_ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - c0 ))" >> "$OUT/cpu.log"
  curl -s http://127.0.0.1:18680/metrics > "$OUT/r$r-$1.metrics"
  kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; rm -rf "$D"
}
V=(native redis)
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
  for x in "${V[@]}"; do EXTRA=""; run "$x"; done
done
for f in $OUT/r*.json; do python3 -c "import json,sys;d=json.load(open('$f'));r=d.get('result',d);print('$f', round(r['msgs_per_sec']), r['latency']['p50_ms'], r['latency']['p99_ms'])"; done
