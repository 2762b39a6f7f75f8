#!/usr/bin/env bash
# bench/cluster/w2.sh — W2 (the queue round trip: send, receive, ack each message) through a
# 3-node cluster against a single node, in one run on this machine (issue 14, "Performance"):
# SQS (aws-sdk-go-v2, JSON protocol) and the native API (the Go client), 1 KiB, 4 consumers,
# 64 prefetched each, 256 sends in flight, --fsync always on every node; alternated ROUNDS
# times so both see the same machine. The queue is created through node 1 (the catalog
# places it, rf 3); the clients talk to its leader (found from `sluice cluster status`) and,
# in a second cluster row, to a node that does not lead it (every request forwarded).
#
#   bench/cluster/w2.sh [--rounds N] [--duration 10s]
#
# Run by hand, never in CI. Everything listens on 127.0.0.1 below the ephemeral port range
# and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=2 DUR=10s
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift ;;
    --duration) DUR=$2; shift ;;
    *) echo "usage: $0 [--rounds N] [--duration 10s]" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=bench/cluster/lib.sh
. bench/cluster/lib.sh
bench_setup sluice-w2bench
# single node: 20080 HTTP, 20324 SQS; node i: 2i080, 2i324, 2i095 (Raft).
./sluice serve --data-dir "$WORK/single" --fsync always --log-level warn \
  --http-addr 127.0.0.1:20080 --kafka-addr "" --sqs-addr 127.0.0.1:20324 2>"$WORK/single.log" &
PID[single]=$!
for i in 1 2 3; do start_node "$i" --log-level info --kafka-addr "" --sqs-addr "127.0.0.1:2${i}324"; done
ready single 20080
for i in 1 2 3; do ready "n$i" "2${i}080"; done
sleep 3 # every node registers its addresses before a queue is placed (rf 3 needs three)

# leader QUEUE: the node leading the queue's Raft group, as node 1 sees it.
leader() {
  ./sluice cluster status -o json --server http://127.0.0.1:21080 |
    python3 -c 'import json,sys; st=json.load(sys.stdin); print(next((q["leader"] for q in st.get("queues") or [] if q["queue"]==sys.argv[1]), 0))' "$1"
}
# w2 label protocol http-port sqs-port name: one run, one table row.
w2() {
  local label=$1 proto=$2 http=$3 sqs=$4 name=$5
  local out
  out=$(./sluice-bench queue --protocol "$proto" --size 1024 --consumers 4 --prefetch 64 --in-flight 256 \
    --duration "$DUR" --count 100000000 --probe-dir "" --quiet -o json --name "$name" \
    --server "http://127.0.0.1:$http" --sqs-url "http://127.0.0.1:$sqs" 2>"$WORK/bench.err") || {
    echo "| $label | failed: $(tail -1 "$WORK/bench.err") |"; return; }
  echo "$out" | python3 -c '
import json,sys
r=json.load(sys.stdin)["result"]; l=r.get("latency") or {}
load=float(open("/proc/loadavg").read().split()[0])
print("| %s | %.2f | %.0f | %.2f | %.2f |" % (sys.argv[1], load, r["msgs_per_sec"], l.get("p50_ms",0), l.get("p99_ms",0)))' "$label"
}
echo "| run | load avg | msgs/s | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  for proto in sqs native; do
    log "round $r $proto"
    w2 "single $proto #$r" "$proto" 20080 20324 "w2-$proto-$r"
    # Create through node 1, then find its leader for the leader row.
    ./sluice queue create "w2c-$proto-$r" --server http://127.0.0.1:21080 >/dev/null 2>&1 || true
    sleep 2
    l=$(leader "w2c-$proto-$r")
    [ "$l" = 0 ] && l=1
    other=$(( l % 3 + 1 ))
    w2 "cluster $proto via leader n$l #$r" "$proto" "2${l}080" "2${l}324" "w2c-$proto-$r"
    w2 "cluster $proto via follower n$other #$r" "$proto" "2${other}080" "2${other}324" "w2c-$proto-$r"
  done
done
