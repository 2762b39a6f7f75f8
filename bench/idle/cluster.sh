#!/usr/bin/env bash
# bench/idle/cluster.sh SLUICE SLUICE_BENCH [SECONDS] [LABEL]
#
# Idle CPU of a 3-node cluster on this machine holding 1,000 partitions (replication
# factor 3, so 1,000 groups on every node, plus the metadata group), as bench/cluster/run.sh
# measures it, without its other workloads: the topic is created and given 1,000 records
# (sluice-bench waits for the leaders), 10 s to quiesce, then SECONDS (60) of the
# processes' CPU from /proc/<pid>/stat. NODES=4 (or 5) runs that many nodes with the same
# replication factor 3, so each node hosts only some partitions and asks its peers who
# leads the others (broker/cluster_leaders.go). Run by hand, one binary at a time (two
# clusters of 3,000 groups at once would measure each other's start); never in CI.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,9p "$0" >&2; exit 2; }
BIN=$1 BENCH=$2 SECS=${3:-60} LABEL=${4:-$1}
WORK=$(mktemp -d /tmp/sluice-idlec.XXXXXX)
PIDS=()
trap 'kill -9 "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
NODES=${NODES:-3}
PEERS=$(seq "$NODES" | sed 's/.*/&=127.0.0.1:33&95/' | paste -sd, -)
for i in $(seq "$NODES"); do
  "$BIN" serve --data-dir "$WORK/n$i" --node-id "$i" --cluster-addr "127.0.0.1:33${i}95" --cluster-peers "$PEERS" \
    --kafka-addr "127.0.0.1:33${i}92" --http-addr "127.0.0.1:33${i}80" --sqs-addr "127.0.0.1:33${i}24" 2>"$WORK/n$i.log" &
  PIDS+=($!)
done
for i in $(seq "$NODES"); do
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:33${i}80/readyz" >/dev/null && break; sleep 0.2; done
done
# A create made before the three nodes registered their addresses is refused
# (INVALID_REPLICATION_FACTOR): try again, bounded.
for try in $(seq 20); do
  "$BENCH" produce --size 1024 --in-flight 64 --batch 1 --count 1000 --partitions 1000 --replication-factor 3 \
    --protocol kafka --kafka-addr 127.0.0.1:33192 --name idle --duration 300s --probe-dir "" --quiet -o json \
    >/dev/null 2>"$WORK/bench.err" && break
  [ "$try" = 20 ] && { cat "$WORK/bench.err" >&2; exit 1; }
  sleep 1
done
sleep 10
cpu() { local t=0; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo $t; }
b=$(cpu "${PIDS[@]}"); t0=$(date +%s.%N)
sleep "$SECS"
a=$(cpu "${PIDS[@]}"); t1=$(date +%s.%N)
python3 -c 'import sys; b,a,t0,t1,n=map(float,sys.argv[1:6]); d=t1-t0; print("%s: idle, %d nodes x 1,000 partitions (rf 3), over %.0f s: %.2f %% of one core for all (%.2f %% per node)" % (sys.argv[6], n, d, (a-b)/d, (a-b)/d/n))' \
  "$b" "$a" "$t0" "$t1" "$NODES" "$LABEL"
