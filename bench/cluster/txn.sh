#!/usr/bin/env bash
# bench/cluster/txn.sh — what Kafka transactions cost on a 3-node cluster against a single
# node, in one run on this machine: each sender is a transactional producer of its own
# (sluice-bench --kafka-transactional) committing one transaction per --batch records to a
# topic of 1 partition (rf 1 on the single node, rf 3 on the cluster), 1 KiB records,
# --fsync always. A transaction is begin, produce, commit: on the cluster the coordinator
# (the controller) records each step as a metadata-group entry and asks the partition's
# leader for the marker, so its cost is in commits, not bytes. Rows: msgs/s, transactions/s
# and the latency of a whole transaction (p50/p99), alternated ROUNDS times.
#
#   bench/cluster/txn.sh [--rounds N] [--duration 10s]
#
# Run by hand, never in CI. Everything listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin
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
bench_setup sluice-txnbench
./sluice serve --data-dir "$WORK/single" --fsync always --log-level warn \
  --http-addr 127.0.0.1:20080 --kafka-addr 127.0.0.1:20092 --sqs-addr "" 2>"$WORK/single.log" &
PID[single]=$!
for i in 1 2 3; do start_node "$i" --log-level warn --kafka-addr "127.0.0.1:2${i}092" --sqs-addr ""; done
ready single 20080
for i in 1 2 3; do ready "n$i" "2${i}080"; done

# txn label addr rf in-flight batch name: one run, one table row.
txn() {
  local label=$1 addr=$2 rf=$3 inflight=$4 batch=$5 name=$6
  ./sluice-bench produce --kafka-transactional --protocol kafka --size 1024 --in-flight "$inflight" --batch "$batch" \
    --duration "$DUR" --count 100000000 --probe-dir "" --quiet -o json \
    --kafka-addr "$addr" --replication-factor "$rf" --partitions 1 --name "$name" >"$WORK/$name.json"
  python3 - "$label" "$(cut -d' ' -f1 /proc/loadavg)" "$batch" "$WORK/$name.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[4]))["result"]
l, batch = r["latency"], int(sys.argv[3])
print("| %s | %s | %.0f | %.0f | %.2f | %.2f |" % (sys.argv[1], sys.argv[2], r["msgs_per_sec"],
    r["msgs_per_sec"] / batch, l["p50_ms"], l["p99_ms"]))
EOF
}

log "transactions: $ROUNDS rounds of $DUR, single node vs 3-node cluster"
echo "| run | load avg | msgs/s | transactions/s | p50 ms (a transaction) | p99 ms |"
echo "|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  # 8 senders with 100 records a transaction; 32 senders with 1 record each.
  for shape in "800 100" "32 1"; do
    read -r inflight batch <<<"$shape"
    senders=$((inflight / batch))
    txn "single, $senders senders × $batch #$r" 127.0.0.1:20092 1 "$inflight" "$batch" "s$batch-$r"
    txn "cluster rf3, $senders senders × $batch #$r" 127.0.0.1:21092 3 "$inflight" "$batch" "c$batch-$r"
  done
done
