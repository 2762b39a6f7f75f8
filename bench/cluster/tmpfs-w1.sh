#!/usr/bin/env bash
# bench/cluster/tmpfs-w1.sh — W1 (Kafka produce, acks=all, 1 KiB, 256 in flight) on a single
# node and on a 3-node cluster whose data directories are all on tmpfs (/dev/shm), where an
# fdatasync costs nothing: what the cluster costs against a single node with the disk taken
# out, side by side, 1 and 8 partitions, ROUNDS times. Prints msgs/s, latency and the CPU per
# message of the serving processes (utime+stime from /proc/<pid>/stat; the cluster's is the
# three nodes' sum). issue 14, docs/benchmarks.md "W1 with the disk taken out".
#
#   ROUNDS="1 2 3" DUR=10s bench/cluster/tmpfs-w1.sh
#
# Run by hand, never in CI; wrap in `flock /work/bench.lock`. Listens on 127.0.0.1:4xxxx.
set -u
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d /tmp/sluice-tmpfsw1.XXXXXX)
go build -o "$WORK/sluice" ./cmd/sluice && go build -o "$WORK/sluice-bench" ./cmd/sluice-bench || exit 1
BIN=$WORK/sluice BENCH=$WORK/sluice-bench DUR=${DUR:-10s}
DIRBASE=$(mktemp -d /dev/shm/sluice-tmpfsw1.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$DIRBASE" "$WORK"' EXIT
$BIN serve --data-dir "$DIRBASE/single" --fsync always --log-level warn --http-addr 127.0.0.1:40080 --kafka-addr 127.0.0.1:40092 --sqs-addr "" 2>"$DIRBASE/s.log" & PIDS+=($!)
P="1=127.0.0.1:41095,2=127.0.0.1:42095,3=127.0.0.1:43095"
for i in 1 2 3; do
  $BIN serve --data-dir "$DIRBASE/n$i" --fsync always --log-level warn --node-id "$i" --cluster-addr "127.0.0.1:4${i}095" --cluster-peers "$P" \
   --http-addr "127.0.0.1:4${i}080" --kafka-addr "127.0.0.1:4${i}092" --sqs-addr "" 2>"$DIRBASE/n$i.log" & PIDS+=($!)
done
for port in 40080 41080 42080 43080; do for _ in $(seq 300); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done; done
# the catalog knows all three nodes once a replicated topic can be created
for _ in $(seq 60); do timeout 20 $BENCH produce --count 1 --protocol kafka --kafka-addr 127.0.0.1:41092 --replication-factor 3 --partitions 1 --name warm --probe-dir "" --quiet >/dev/null 2>&1 && break; sleep 1; done
cpu() { local t=0; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done; echo $t; }
run() { # label kafka-addr rf partitions name pids...
  local l=$1 a=$2 rf=$3 parts=$4 n=$5; shift 5
  local b e
  b=$(cpu "$@")
  $BENCH produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000 --protocol kafka --probe-dir "" --quiet -o json \
    --kafka-addr "$a" --replication-factor "$rf" --partitions "$parts" --name "$n" > "$DIRBASE/$n.json"
  e=$(cpu "$@")
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["result"]; s=max(r["sent"],1); print("%-22s %8.0f msgs/s p50 %6.2f p99 %7.2f ms  cpu %.1f us/msg load %s" % (sys.argv[2], r["msgs_per_sec"], r["latency"]["p50_ms"], r["latency"]["p99_ms"], (int(sys.argv[4])-int(sys.argv[3]))*10000/s, open("/proc/loadavg").read().split()[0]))' \
    "$DIRBASE/$n.json" "$l" "$b" "$e"
}
for r in ${ROUNDS:-1}; do
  for parts in 1 8; do
    run "single p$parts" 127.0.0.1:40092 1 "$parts" "s$parts-$r" "${PIDS[0]}"
    run "cluster p$parts" 127.0.0.1:41092 3 "$parts" "c$parts-$r" "${PIDS[1]}" "${PIDS[2]}" "${PIDS[3]}"
  done
done
