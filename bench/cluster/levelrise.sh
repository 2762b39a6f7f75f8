#!/usr/bin/env bash
# bench/cluster/levelrise.sh — what a 3-node cluster with many partitions goes through when
# its feature level rises to 4 (docs/cluster.md, "Feature levels"): every partition replica
# whose checkpoint predates the level is given an empty entry to checkpoint after (the
# producer state travels with the checkpoint from level 4), so each node takes one snapshot
# per partition it hosts, all at once. Measured: how long until every node took them, the
# most peers any node counted down meanwhile (sluice_raft_peers_down: a Ready loop stalled
# past the node timeout), and the elections the burst caused (partitions whose term rose
# while their leader, before and after, was not the restarted node).
#
#   bench/cluster/levelrise.sh [--partitions 1000]
#
# Node 3 holds the level at 3 (--cluster-max-feature-level 3) while a topic of N partitions
# (rf 3) is created and written to; then node 3 is stopped and started without the flag, and
# the level rises. Run by hand, never in CI. Everything listens on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
PARTS=1000
while [ $# -gt 0 ]; do
  case $1 in
    --partitions) PARTS=$2; shift ;;
    *) echo "usage: $0 [--partitions N]" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=bench/cluster/lib.sh
. bench/cluster/lib.sh
bench_setup sluice-levelrise
for i in 1 2; do start_node "$i" --log-level info --kafka-addr "127.0.0.1:2${i}092" --sqs-addr ""; done
start_node 3 --log-level info --kafka-addr 127.0.0.1:23092 --sqs-addr "" --cluster-max-feature-level 3
for i in 1 2 3; do ready "n$i" "2${i}080"; done

metric() { # metric HTTP-PORT NAME: the sum of NAME's samples
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%d", s}'
}
status() { ./sluice cluster status --server "http://127.0.0.1:$1" -o json; }
level() { status "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["feature_level"])'; }

log "level $(level 21080); creating $PARTS partitions (rf 3) and writing one record to each"
./sluice-bench produce --size 1024 --in-flight 256 --batch 1 --protocol kafka --probe-dir "" --quiet -o json \
  --kafka-addr 127.0.0.1:21092 --replication-factor 3 --partitions "$PARTS" --name lr \
  --duration 600s --count "$PARTS" >/dev/null
sleep 10 # the groups quiesce
status 21080 >"$WORK/before.json"
declare -A SNAPS
for i in 1 2 3; do SNAPS[$i]=$(metric "2${i}080" sluice_raft_snapshots_created_total); done
log "snapshots so far: n1 ${SNAPS[1]}, n2 ${SNAPS[2]}, n3 ${SNAPS[3]}; restarting node 3 without the cap"
kill -TERM "${PID[n3]}"; wait "${PID[n3]}" 2>/dev/null || true
start_node 3 --log-level info --kafka-addr 127.0.0.1:23092 --sqs-addr ""
t0=$(date +%s.%N)
ready n3 23080
down=0 done_at=""
for _ in $(seq 1200); do # 0.25 s steps, 300 s at most
  all=1
  for i in 1 2 3; do
    d=$(metric "2${i}080" sluice_raft_peers_down); [ "$d" -gt "$down" ] && down=$d
    if [ $(($(metric "2${i}080" sluice_raft_snapshots_created_total) - ${SNAPS[$i]})) -lt "$PARTS" ]; then all=0; fi
  done
  if [ "$all" = 1 ]; then done_at=$(date +%s.%N); break; fi
  sleep 0.25
done
sleep 5
status 21080 >"$WORK/after.json"
echo
echo "level rise with $PARTS partitions (rf 3): level $(level 21080) after"
if [ -n "$done_at" ]; then
  python3 -c 'import sys; print("every node took a snapshot of every partition %.1f s after node 3 was started" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$done_at"
else
  echo "not every node took a snapshot of every partition within 300 s"
fi
for i in 1 2 3; do
  echo "  node $i: $(($(metric "2${i}080" sluice_raft_snapshots_created_total) - ${SNAPS[$i]})) snapshots since"
done
echo "most peers any node counted down meanwhile: $down"
python3 - "$WORK/before.json" "$WORK/after.json" <<'EOF'
import json, sys
def parts(path):
    return {(p["topic"], p["partition"]): p for p in json.load(open(path))["partitions"]}
b, a = parts(sys.argv[1]), parts(sys.argv[2])
moved = [k for k in b if k in a and a[k]["term"] > b[k]["term"]]
unexplained = [k for k in moved if b[k]["leader"] != 3 and a[k]["leader"] != 3]
print("partitions whose term rose: %d of %d; of them, with neither leader node 3 (elections the burst caused): %d"
      % (len(moved), len(b), len(unexplained)))
EOF
