#!/bin/bash
# ab-redis.sh OUTDIR ROUNDS DUR: ab.sh's three sluice variants (W1 over Kafka, native records,
# native batches; /tmp/nb/sluice, --fsync always) and Redis with appendfsync always
# (/tmp/nb/peerbench, as bench/compare/peers.sh starts it), the four in rotating order each
# round, with the disk probe (peerbench probe) at the start and the end. Hold
# /work/bench.lock around it.
set -u
OUT=$1; ROUNDS=$2; DUR=$3
mkdir -p "$OUT"
W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000)
probe() { local d; d=$(mktemp -d /tmp/nb/probe.XXXX); /tmp/nb/peerbench probe --dir "$d" >> "$OUT/disk.txt" 2>&1; rm -rf "$d"; }
run() { # variant
  if [ "$1" = redis ]; then
    local d; d=$(mktemp -d /tmp/nb/redis.XXXX)
    redis-server --bind 127.0.0.1 --port 18683 --dir "$d" --appendonly yes --appendfsync always --save "" \
      --daemonize no --protected-mode yes > "$d/log" 2>&1 &
    local rp=$!
    for i in $(seq 1 100); do redis-cli -p 18683 ping >/dev/null 2>&1 && break; sleep 0.1; done
    timeout 120 /tmp/nb/peerbench run --workload produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" \
      --count 100000000 --peer redis --addr 127.0.0.1:18683 --label "redis (always)" --name "w1-redis-r$r" \
      > "$OUT/r$r-redis.json" 2>>"$OUT/errors.log"
    kill "$rp"; while kill -0 "$rp" 2>/dev/null; do sleep 0.1; done; rm -rf "$d"
    return
  fi
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
probe
V=(kafka native batches redis)
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
  k=$(( (r-1) % 4 ))
  for x in "${V[@]:k}" "${V[@]:0:k}"; do run "$x"; done
done
echo "done $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
probe
