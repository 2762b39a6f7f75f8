#!/bin/bash
# ab.sh OUTDIR ROUNDS DUR [labels...]: W1 native (StreamService Publish) and W1 over Kafka on each
# sluice build in /tmp/pub/<label>/ (--fsync always, a fresh data dir per build and round), side by side,
# interleaved: the builds' order and the two protocols' order rotate each round. One JSON per run, server
# CPU ticks per run, load average per round, disk probe at the start and the end. WITH_W3=1 adds W3 native
# (latency at 5,000 msgs/s) on each build after its W1 runs.
set -u
OUT=$1; ROUNDS=$2; DUR=$3; shift 3
LABELS=("$@"); [ ${#LABELS[@]} -eq 0 ] && LABELS=(old new)
mkdir -p "$OUT"
W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000)
probe() { local d; d=$(mktemp -d /tmp/pub/probe.XXXX); /tmp/pub/peerbench probe --dir "$d" >> "$OUT/disk.txt" 2>&1; rm -rf "$d"; }
sl() { # label
  local D; D=$(mktemp -d /tmp/pub/run.XXXX)
  /tmp/pub/$1/sluice serve --data-dir $D/data --http-addr 127.0.0.1:18580 --kafka-addr 127.0.0.1:18581 --sqs-addr 127.0.0.1:18582 --fsync always > $D/log 2>&1 &
  local pid=$!
  for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18580/readyz && break; sleep 0.2; done
  local protos=(native kafka); [ $((r % 2)) = 0 ] && protos=(kafka native)
  for p in "${protos[@]}"; do
    local c0; c0=$(awk '{print $14+$15}' /proc/$pid/stat)
    /usr/bin/time -f "r$r $1 $p client_cpu_s %U %S" -a -o "$OUT/clientcpu.log" timeout 120 /tmp/pub/$1/sluice-bench "${W1[@]}" --protocol $p --server http://127.0.0.1:18580 --kafka-addr 127.0.0.1:18581 \
      --probe-dir "" --quiet -o json --name "b-$p-r$r" > "$OUT/r$r-$1-$p-W1.json" 2>>"$OUT/errors.log"
    echo "r$r $1 $p server_cpu_ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - c0 ))" >> "$OUT/cpu.log"
  done
  if [ "${WITH_W3:-0}" = 1 ]; then
    timeout 120 /tmp/pub/$1/sluice-bench latency --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration "$DUR" --count 100000000 \
      --protocol native --server http://127.0.0.1:18580 --probe-dir "" --quiet -o json --name "b-w3-r$r" > "$OUT/r$r-$1-native-W3.json" 2>>"$OUT/errors.log"
  fi
  kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; rm -rf "$D"
}
probe
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
  n=${#LABELS[@]}; k=$(( (r-1) % n ))
  for x in "${LABELS[@]:k}" "${LABELS[@]:0:k}"; do sl "$x"; done
done
echo "done $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
probe
