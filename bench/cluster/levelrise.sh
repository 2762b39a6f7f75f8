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
# A snapshot every 4 entries: every partition written below the level has a checkpoint of
# the old kind, as every busy partition of a cluster that ran a while at level 3 has.
SNAP=(--cluster-snapshot-entries 4)
for i in 1 2; do start_node "$i" --log-level info --kafka-addr "127.0.0.1:2${i}092" --sqs-addr "" "${SNAP[@]}"; done
start_node 3 --log-level info --kafka-addr 127.0.0.1:23092 --sqs-addr "" "${SNAP[@]}" --cluster-max-feature-level 3
for i in 1 2 3; do ready "n$i" "2${i}080"; done

metric() { # metric HTTP-PORT NAME: the sum of NAME's samples
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%d", s}'
}
rounds() { # rounds HTTP-PORT: the Ready round histogram's buckets, "le count" per line
  curl -fsS "http://127.0.0.1:$1/metrics" | awk 'index($1, "sluice_raft_ready_round_duration_seconds_bucket{") == 1 {
    match($1, /le="[^"]*"/); print substr($1, RSTART + 4, RLENGTH - 5), $2}'
}
status() { ./sluice cluster status --server "http://127.0.0.1:$1" -o json; }
level() { status "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["feature_level"])'; }

for _ in $(seq 100); do # until the catalog has every node (a topic of rf 3 needs three)
  [ "$(status 21080 | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))')" = 3 ] && break
  sleep 0.2
done
log "level $(level 21080); creating $PARTS partitions (rf 3) and writing 1,000 records to each"
# (franz-go batches a partition's records: 1,000 make a few dozen entries.)
./sluice-bench produce --size 100 --in-flight 256 --batch 1 --protocol kafka --probe-dir "" --quiet -o json \
  --kafka-addr 127.0.0.1:21092 --replication-factor 3 --partitions "$PARTS" --name lr \
  --duration 600s --count $((PARTS * 1000)) >/dev/null
sleep 10 # the groups quiesce
status 21080 >"$WORK/before.json"
echo "partitions with a checkpoint: $(status 21080 | python3 -c 'import json,sys; print(sum(1 for p in json.load(sys.stdin)["partitions"] if p.get("applied", 0) > 5))')+ (applied past the first snapshot)"
declare -A SNAPS
for i in 1 2 3; do SNAPS[$i]=$(metric "2${i}080" sluice_raft_snapshots_created_total); done
for i in 1 2; do rounds "2${i}080" >"$WORK/rounds$i.before"; done
: >"$WORK/rounds3.before" # node 3 restarts: a new process counts from 0
log "snapshots so far: n1 ${SNAPS[1]}, n2 ${SNAPS[2]}, n3 ${SNAPS[3]}; restarting node 3 without the cap"
kill -TERM "${PID[n3]}"; wait "${PID[n3]}" 2>/dev/null || true
start_node 3 --log-level info --kafka-addr 127.0.0.1:23092 --sqs-addr "" "${SNAP[@]}"
SNAPS[3]=0 # a new process counts from 0
t0=$(date +%s.%N)
ready n3 23080
# Peers counted down: only once every node has heard from every other since node 3 came
# back (its restart is counted down by the others until then).
down=0 seen_all_up=0 last=-1 last_at=$t0 steady=0
for _ in $(seq 1200); do # 0.25 s steps, 300 s at most: until no node took a snapshot for 40 s
  total=0 now_down=0
  for i in 1 2 3; do
    d=$(metric "2${i}080" sluice_raft_peers_down); now_down=$((now_down + d))
    if [ "$seen_all_up" = 1 ] && [ "$d" -gt 0 ]; then
      python3 -c 'import sys,time; print("  node %s counted %s peer(s) down, %.1f s after node 3 was started" % (sys.argv[1], sys.argv[2], time.time() - float(sys.argv[3])))' "$i" "$d" "$t0" >>"$WORK/down.txt"
      [ "$d" -gt "$down" ] && down=$d
    fi
    total=$((total + $(metric "2${i}080" sluice_raft_snapshots_created_total) - ${SNAPS[$i]}))
  done
  [ "$now_down" = 0 ] && seen_all_up=1
  if [ "$total" != "$last" ]; then last=$total last_at=$(date +%s.%N) steady=0; else steady=$((steady + 1)); fi
  [ "$steady" -ge 160 ] && [ "$total" -gt 0 ] && break
  sleep 0.25
done
status 21080 >"$WORK/after.json"
echo
echo "level rise with $PARTS partitions (rf 3): level $(level 21080) after"
python3 -c 'import sys; print("the snapshots it caused: the last %.1f s after node 3 was started" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$last_at"
for i in 1 2 3; do
  echo "  node $i: $(($(metric "2${i}080" sluice_raft_snapshots_created_total) - ${SNAPS[$i]})) snapshots since"
done
echo "most peers any node counted down once all were up again: $down"
for i in 1 2 3; do # Ready rounds since: how many took longer than 0.05 and 0.2 s, and the longest's bucket
  rounds "2${i}080" | python3 -c '
import sys
before = dict(l.split() for l in open(sys.argv[1]))
now = [(l.split()[0], float(l.split()[1]) - float(before.get(l.split()[0], 0))) for l in sys.stdin]
total = dict(now)["+Inf"]
under = {le: n for le, n in now}
over = lambda le: total - under.get(le, 0)
longest = next(le for le, n in now if n == total)
print("  node %s: %d Ready rounds since, %d over 0.05 s, %d over 0.2 s, the longest at most %s s"
      % (sys.argv[2], total, over("0.0512"), over("0.2048"), longest))
' "$WORK/rounds$i.before" "$i"
done
[ -f "$WORK/down.txt" ] && uniq "$WORK/down.txt" | head -20
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
