#!/usr/bin/env bash
# bench/cluster/profile.sh — CPU, block and mutex profiles of a 3-node cluster's leader
# under W1 (Kafka produce, acks=all, 1 KiB, 256 in flight), 1 and 8 partitions, through Go's
# /debug/pprof (SLUICE_PPROF_ADDR, cmd/sluice/pprof.go); the text form (pprof -top) of each
# on stdout. The node profiled is the one leading the most partitions of the topic.
#
#   bench/cluster/profile.sh [--seconds 8]
#
# Run by hand, never in CI. Everything listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin
SECS=8
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECS=$2; shift ;;
    *) echo "usage: $0 [--seconds 8]" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=bench/cluster/lib.sh
. bench/cluster/lib.sh
bench_setup sluice-clusterprof
for i in 1 2 3; do
  SLUICE_PPROF_ADDR="127.0.0.1:2${i}060" start_node "$i" --log-level warn --kafka-addr "127.0.0.1:2${i}092" --sqs-addr ""
done
for i in 1 2 3; do ready "n$i" "2${i}080"; done
# the catalog knows all three nodes once a replicated topic can be created
for _ in $(seq 60); do
  timeout 20 ./sluice-bench produce --count 1 --protocol kafka --kafka-addr 127.0.0.1:21092 --replication-factor 3 \
    --partitions 1 --name warm --probe-dir "" --quiet >/dev/null 2>&1 && break
  sleep 1
done
# leader topic: the node leading the most of the topic's partitions, from its own status
leader() {
  local i best=1 most=-1 n
  for i in 1 2 3; do
    n=$(curl -fsS -m 5 "http://127.0.0.1:2${i}080/v1/admin/cluster" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(sum(1 for p in s["partitions"] if p["topic"] == sys.argv[1] and p["leader"] == s["node"]))' "$1")
    if [ "$n" -gt "$most" ]; then most=$n best=$i; fi
  done
  echo "$best"
}
for parts in 1 8; do
  name="prof$parts"
  timeout 120 ./sluice-bench produce --size 1024 --in-flight 256 --batch 1 --duration "$((SECS + 6))s" --count 100000000 \
    --protocol kafka --probe-dir "" --quiet -o json --kafka-addr 127.0.0.1:21092 --replication-factor 3 \
    --partitions "$parts" --name "$name" >"$WORK/$name.json" &
  BENCH=$!
  sleep 3 # the topic is created and its leaders elected
  L=$(leader "$name")
  base="http://127.0.0.1:2${L}060/debug/pprof"
    # the three at once, over the same seconds (block and mutex as deltas over them)
  C=()
  for kind in profile block mutex; do
    curl -fsS -m "$((SECS + 20))" "$base/$kind?seconds=$SECS" -o "$WORK/${kind/profile/cpu}$parts.pb.gz" &
    C+=($!)
  done
  wait "${C[@]}" || true
  wait "$BENCH" || true
  python3 - "$WORK/$name.json" "$parts" "$L" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
print("\n## W1, %s partition(s), node %s profiled (load average %s): %.0f msgs/s, p50 %.2f ms, p99 %.2f ms" % (
    sys.argv[2], sys.argv[3], sys.argv[4], r["msgs_per_sec"], r["latency"]["p50_ms"], r["latency"]["p99_ms"]))
PY
  for kind in cpu block mutex; do
    echo; echo "### $kind ($SECS s)"; echo '```'
    go tool pprof -top -nodecount 30 "$WORK/sluice" "$WORK/$kind$parts.pb.gz" 2>/dev/null | sed -n '1,40p' || true
    echo '```'
    echo "cumulative, sluice and raft frames:"; echo '```'
    go tool pprof -top -cum -nodecount 200 "$WORK/sluice" "$WORK/$kind$parts.pb.gz" 2>/dev/null |
      grep -E "sluice|raft" | head -25 || true
    echo '```'
  done
done
