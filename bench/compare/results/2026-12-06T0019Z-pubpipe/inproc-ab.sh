#!/bin/bash
# inproc-ab.sh OUT ROUNDS labels...: TestBenchProfile (client and broker in one process, --fsync always on the
# real disk, 10 s each) W1 over the native API and W1 over Kafka per build, builds and protocols rotated per round.
OUT=$1; ROUNDS=$2; shift 2; LABELS=("$@")
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
  n=${#LABELS[@]}; k=$(( (r-1) % n ))
  for l in "${LABELS[@]:k}" "${LABELS[@]:0:k}"; do
    ws=(W1-native W1); [ $((r % 2)) = 0 ] && ws=(W1 W1-native)
    for w in "${ws[@]}"; do
      d=$(mktemp -d /tmp/pub/ip.XXXX)
      (cd "$d" && SLUICE_BENCH_PROFILE=$w timeout 90 /tmp/pub/inproc-$l.test -test.run TestBenchProfile -test.v 2>&1 | grep msgs/s | sed "s|^|r$r $l $w |") >> "$OUT/results.txt"
      rm -rf "$d"
    done
  done
done
echo "done $(date -u +%T) $(cat /proc/loadavg)" >> "$OUT/uptime.log"
