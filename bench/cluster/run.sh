#!/usr/bin/env bash
# bench/cluster/run.sh — what the cluster costs against a single node, in one run on this
# machine (issue 14, "Performance"):
#
#   W1        Kafka produce, acks=all, 1 KiB, 256 in flight, 1 and 8 partitions: a
#             single node (--fsync always, rf 1) against a 3-node cluster on loopback
#             (rf 3), alternated ROUNDS times so both see the same machine; msgs/s,
#             produce latency p50/p99, CPU per message of the node(s) serving it, and
#             the cluster's Ready rounds in the run (the bucket of their p99, and of the
#             longest: every group of a node waits for its round).
#   failover  the leader of a partition SIGKILLed under an acks=all producer, restarted,
#             KILLS times: kill to the first acknowledged write (TestLeaderKilledUnderLoad).
#   idle      the 3 nodes' CPU over IDLE_SECS with 1,000 partitions (rf 3) created and
#             idle (their groups quiesced), from /proc/<pid>/stat.
#   profile   a CPU profile of the W1 leader (8 partitions, the node leading the most),
#             with perf (kernel and Go frames alike; Go's own CPU, block and mutex
#             profiles are bench/cluster/profile.sh): the top symbols.
#
#   bench/cluster/run.sh [--rounds N] [--duration 10s] [--kills 20] [--idle-secs 60] [--no-profile] [--w1-only] [--baseline REV]
#
# --w1-only stops after the W1 tables (no profile, idle or failover): a few minutes.
# --baseline REV also runs a second 3-node cluster built from git revision REV (nodes on
# ports 1i080/1i092/1i095) in every W1 round, rows "base": before and after in one run.
# Run by hand, never in CI. Everything listens on 127.0.0.1 and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export PATH=$PATH:/usr/local/go/bin
ROUNDS=2 DUR=10s KILLS=20 IDLE_SECS=60 PROFILE=1 W1ONLY=0 BASE=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift ;;
    --duration) DUR=$2; shift ;;
    --kills) KILLS=$2; shift ;;
    --idle-secs) IDLE_SECS=$2; shift ;;
    --no-profile) PROFILE=0 ;;
    --w1-only) W1ONLY=1 PROFILE=0 ;;
    --baseline) BASE=$2; shift ;;
    *) echo "usage: $0 [--rounds N] [--duration 10s] [--kills 20] [--idle-secs 60] [--no-profile] [--w1-only] [--baseline REV]" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=bench/cluster/lib.sh
. bench/cluster/lib.sh
bench_setup sluice-clusterbench
if [ -n "$BASE" ]; then
  mkdir "$WORK/base-src"
  (cd "$ROOT" && git archive "$BASE") | tar -x -C "$WORK/base-src"
  (cd "$WORK/base-src" && go build -o "$WORK/sluice-base" ./cmd/sluice)
fi
# Ports, below Linux's ephemeral range (32768 and up, where a client's own port may sit):
# single node 20080 (HTTP), 20092 (Kafka); node i of the cluster 2i080, 2i092, 2i095 (Raft).
./sluice serve --data-dir "$WORK/single" --fsync always --log-level warn \
  --http-addr 127.0.0.1:20080 --kafka-addr 127.0.0.1:20092 --sqs-addr "" 2>"$WORK/single.log" &
PID[single]=$!
for i in 1 2 3; do start_node "$i" --log-level info --kafka-addr "127.0.0.1:2${i}092" --sqs-addr ""; done
BASE_PEERS="1=127.0.0.1:11095,2=127.0.0.1:12095,3=127.0.0.1:13095"
if [ -n "$BASE" ]; then
  for i in 1 2 3; do
    ./sluice-base serve --data-dir "$WORK/b$i" --fsync always --log-level info --node-id "$i" \
      --cluster-addr "127.0.0.1:1${i}095" --cluster-peers "$BASE_PEERS" \
      --http-addr "127.0.0.1:1${i}080" --kafka-addr "127.0.0.1:1${i}092" --sqs-addr "" 2>"$WORK/b$i.log" &
    PID[b$i]=$!
  done
fi
ready single 20080
for i in 1 2 3; do ready "n$i" "2${i}080"; done
CLUSTER_PIDS="${PID[n1]} ${PID[n2]} ${PID[n3]}"
if [ -n "$BASE" ]; then
  for i in 1 2 3; do ready "b$i" "1${i}080"; done
  BASE_PIDS="${PID[b1]} ${PID[b2]} ${PID[b3]}"
fi

cpu() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
ticks() { local p; for p in "$@"; do awk '{printf "%d,", $14 + $15}' "/proc/$p/stat"; done; }
# fsyncs HTTP-ports…: fdatasyncs so far and their seconds, summed over the nodes (the Raft
# log's and the partition logs' alike: sluice_storage_fsync_duration_seconds).
fsyncs() {
  local port
  for port in "$@"; do curl -fsS "http://127.0.0.1:$port/metrics"; done |
    awk '/^sluice_storage_fsync_duration_seconds_count/ {n += $2} /^sluice_storage_fsync_duration_seconds_sum/ {s += $2}
      END {printf "%d:%f", n, s}'
}
# rounds HTTP-ports…: the Ready round histogram's buckets summed over the nodes, as
# "le=count," pairs (sluice_raft_ready_round_duration_seconds; empty for a single node).
rounds() {
  local port
  for port in "$@"; do curl -fsS "http://127.0.0.1:$port/metrics"; done |
    awk 'index($1, "sluice_raft_ready_round_duration_seconds_bucket{") == 1 {
      match($1, /le="[^"]*"/); n[substr($1, RSTART + 4, RLENGTH - 5)] += $2}
      END {for (k in n) printf "%s=%d,", k, n[k]}'
}
W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count 100000000 --protocol kafka --probe-dir "" --quiet -o json)
# w1 label kafka-addr rf partitions name "http-ports" pids…: one W1 run, one table row; the
# JSON kept.
w1() {
  local label=$1 addr=$2 rf=$3 parts=$4 name=$5 ports=$6; shift 6
  local before after fb fa rb ra
  # shellcheck disable=SC2086
  fb=$(fsyncs $ports); rb=$(rounds $ports); before=$(ticks "$@")
  ./sluice-bench "${W1[@]}" --kafka-addr "$addr" --replication-factor "$rf" --partitions "$parts" --name "$name" >"$WORK/$name.json"
  # shellcheck disable=SC2086
  after=$(ticks "$@"); fa=$(fsyncs $ports); ra=$(rounds $ports)
  python3 - "$label" "$(cut -d' ' -f1 /proc/loadavg)" "$before" "$after" "$WORK/$name.json" "$fb" "$fa" "$rb" "$ra" <<'EOF' | tee -a "$WORK/w1.rows"
import json, sys
r = json.load(open(sys.argv[5]))["result"]
l = r["latency"]
sent = max(r["sent"], 1)
b = [int(x) for x in sys.argv[3].split(",") if x]
a = [int(x) for x in sys.argv[4].split(",") if x]
per = [(y - x) * 10000 / sent for x, y in zip(b, a)]  # clock ticks are 10 ms
(n0, s0), (n1, s1) = [map(float, v.split(":")) for v in sys.argv[6:8]]
syncs = n1 - n0
# The Ready rounds in the run, over the nodes: the bucket holding the p99 and the longest.
hist = lambda v: {k: int(n) for k, n in (kv.split("=") for kv in v.split(",") if kv)}
rb, ra = hist(sys.argv[8]), hist(sys.argv[9])
rounds = "—"  # a single node has no Ready loop
if ra and ra["+Inf"] > rb.get("+Inf", 0):
    les = sorted((float(k), ra[k] - rb.get(k, 0)) for k in ra if k != "+Inf")
    total = ra["+Inf"] - rb.get("+Inf", 0)
    at = lambda q: next(("%g" % (le * 1000) for le, n in les if n >= q * total), "> %g" % (les[-1][0] * 1000))
    rounds = "%d, ≤ %s / ≤ %s" % (total, at(0.99), at(1.0))
print("| %s | %s | %.0f | %.2f | %.2f | %.1f | %s | %.0f | %.2f | %s |" % (sys.argv[1], sys.argv[2], r["msgs_per_sec"], l["p50_ms"],
    l["p99_ms"], sum(per), " / ".join("%.1f" % x for x in per), sent / max(syncs, 1), (s1 - s0) * 1000 / max(syncs, 1), rounds))
EOF
}

./sluice-bench produce --count 1 --protocol kafka --kafka-addr 127.0.0.1:20092 --name probe --probe-dir "$WORK" \
  --quiet | grep 'disk under' || true
log "W1: $ROUNDS rounds of $DUR, single node vs 3-node cluster"
echo "| run | load avg | msgs/s | p50 ms | p99 ms | broker CPU µs/msg | per node (n1 / n2 / n3) | msgs per fdatasync (all nodes) | fdatasync mean ms | Ready rounds (all nodes), p99 / longest ms |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
  for parts in 1 8; do
    w1 "single rf1 p$parts #$r" 127.0.0.1:20092 1 "$parts" "s$parts-$r" 20080 "${PID[single]}"
    # shellcheck disable=SC2086
    w1 "cluster rf3 p$parts #$r" 127.0.0.1:21092 3 "$parts" "c$parts-$r" "21080 22080 23080" $CLUSTER_PIDS
    if [ -n "$BASE" ]; then
      # shellcheck disable=SC2086
      w1 "base rf3 p$parts #$r" 127.0.0.1:11092 3 "$parts" "b$parts-$r" "11080 12080 13080" $BASE_PIDS
    fi
  done
done
python3 - "$WORK/w1.rows" "$BASE" <<'EOF'
import re, sys, statistics
rows = [l.split("|")[1:-1] for l in open(sys.argv[1])]
by = {}
for cells in rows:
    label = cells[0].strip().rsplit(" #", 1)[0]
    by.setdefault(label, []).append([float(c) for c in cells[2:6]])
print()
print("| partitions | cluster/single msgs/s | single p50/p99 ms | cluster p50/p99 ms | CPU µs/msg single / cluster (3 nodes) |")
print("|---|---|---|---|---|")
for p in (1, 8):
    s, c = by["single rf1 p%d" % p], by["cluster rf3 p%d" % p]
    m = lambda rs, i: statistics.median(r[i] for r in rs)
    print("| %d | %.2f× (%.0f / %.0f) | %.2f / %.2f | %.2f / %.2f | %.1f / %.1f |" % (
        p, m(c, 0) / m(s, 0), m(c, 0), m(s, 0), m(s, 1), m(s, 2), m(c, 1), m(c, 2), m(s, 3), m(c, 3)))
if "base rf3 p1" in by:
    print()
    print("| partitions | base (%s) / single msgs/s | base p50/p99 ms | cluster / base msgs/s |" % sys.argv[2])
    print("|---|---|---|---|")
    for p in (1, 8):
        s, c, b = by["single rf1 p%d" % p], by["cluster rf3 p%d" % p], by["base rf3 p%d" % p]
        m = lambda rs, i: statistics.median(r[i] for r in rs)
        print("| %d | %.2f× (%.0f / %.0f) | %.2f / %.2f | %.2f× |" % (p, m(b, 0) / m(s, 0), m(b, 0), m(s, 0), m(b, 1), m(b, 2), m(c, 0) / m(b, 0)))
print("(medians over the rounds)")
EOF
# Leaderships moved during the runs (each partition returns to its preferred replica once
# in sync, checked every 10 s): a move stalls that partition's producers for a round trip.
echo "preferred-leader handbacks during W1: $(cat "$WORK"/n?.log | grep -c 'handing a partition back' || true)"
[ "$W1ONLY" = 1 ] && exit 0
if [ -n "$BASE" ]; then # the baseline cluster is not measured after W1
  for i in 1 2 3; do kill "${PID[b$i]}"; wait "${PID[b$i]}" 2>/dev/null || true; unset "PID[b$i]"; done
fi

if [ "$PROFILE" = 1 ]; then
  log "profile: perf on the leader of a 1-partition topic under W1"
  ./sluice-bench "${W1[@]}" --kafka-addr 127.0.0.1:21092 --replication-factor 3 --partitions 1 --name prof \
    --duration 15s >"$WORK/prof.json" &
  BENCH=$!
  sleep 3 # the topic is created and its leader elected
  LEADER=$(python3 - <<'EOF'
import socket, struct
# Kafka Metadata v1 for topic "prof", by hand: the leader of partition 0.
s = socket.create_connection(("127.0.0.1", 21092))
body = struct.pack(">hhih", 3, 1, 1, 5) + b"bench" + struct.pack(">ih", 1, 4) + b"prof"
s.sendall(struct.pack(">i", len(body)) + body)
b = s.recv(struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0], socket.MSG_WAITALL)
o = 4
def take(fmt):
    global o
    v = struct.unpack_from(fmt, b, o)[0]; o += struct.calcsize(fmt); return v
def string():
    global o
    n = take(">h"); o += max(n, 0)
for _ in range(take(">i")):
    take(">i"); string(); take(">i"); string()
take(">i")  # controller
take(">i"); take(">h"); string(); take(">b")  # one topic
take(">i"); take(">h"); take(">i")            # its first partition
print(take(">i"))
EOF
)
  LPID=${PID[n$LEADER]}
  perf record -F 499 -g -p "$LPID" -o "$WORK/perf.data" -- sleep 8 >/dev/null 2>&1 || true
  wait "$BENCH" || true
  python3 - "$WORK/prof.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
print("\nprofiled run (cluster rf3 p1, 15 s): %.0f msgs/s, p50 %.2f ms, p99 %.2f ms" % (r["msgs_per_sec"], r["latency"]["p50_ms"], r["latency"]["p99_ms"]))
EOF
  perf report -i "$WORK/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null >"$WORK/perf.txt" || true
  python3 - "$LEADER" "$WORK/perf.txt" <<'EOF'
import re, sys
rows = []
for line in open(sys.argv[2]):
    m = re.match(r"\s+([0-9.]+)%\s+\[(.)\]\s+(\S+)", line)
    if m:
        rows.append((float(m.group(1)), m.group(2), m.group(3)))
def pkg(kind, sym):
    if kind == "k":
        return "kernel"
    if sym.startswith("runtime.") or sym.startswith("internal/runtime"):
        return "go runtime"
    head, _, tail = sym.rpartition("/")
    return (head + "/" if head else "") + tail.split(".")[0]
by = {}
for pct, kind, sym in rows:
    by[pkg(kind, sym)] = by.get(pkg(kind, sym), 0) + pct
print("\nCPU profile of node %s (the partition's leader) under W1, perf 8 s at 499 Hz, self time by package:" % sys.argv[1])
print("```")
for p, v in sorted(by.items(), key=lambda kv: -kv[1])[:15]:
    print("%6.2f%%  %s" % (v, p))
print("```\ntop symbols:\n```")
for pct, kind, sym in rows[:20]:
    print("%6.2f%%  [%s] %s" % (pct, kind, sym))
print("```")
EOF
fi

# Idle: stop the single node (it is not measured), create 1,000 partitions on the cluster.
kill "${PID[single]}"; wait "${PID[single]}" 2>/dev/null || true; unset 'PID[single]'
log "idle: 1,000 partitions (rf 3), then the 3 nodes' CPU over ${IDLE_SECS}s"
# The bench creates the topic and waits for 1,000 leaders (one group sync after another on
# each node: minutes on a shared disk), then writes 1,000 records; its --duration bounds both.
./sluice-bench "${W1[@]}" --kafka-addr 127.0.0.1:21092 --replication-factor 3 --partitions 1000 --name idle \
  --duration 300s --count 1000 >/dev/null
sleep 10 # the groups written to quiesce after 6 ticks; the rest never woke
# shellcheck disable=SC2086
before=$(cpu $CLUSTER_PIDS); t0=$(date +%s.%N)
sleep "$IDLE_SECS"
# shellcheck disable=SC2086
after=$(cpu $CLUSTER_PIDS); t1=$(date +%s.%N)
echo
python3 -c 'import sys; b,a,t0,t1=map(float,sys.argv[1:]); print("idle, 3 nodes with 1,000 partitions (rf 3) each: %.2f %% of one core for all three together (%.2f %% per node), over %.0f s" % ((a-b)/100/(t1-t0)*100, (a-b)/100/(t1-t0)*100/3, t1-t0))' "$before" "$after" "$t0" "$t1"
for i in 1 2 3; do
  p=${PID[n$i]}
  echo "  node $i: $(awk '{print $20}' /proc/$p/stat) threads, RSS $(awk '/VmRSS/ {print $2, $3}' /proc/$p/status)"
done
if [ "$PROFILE" = 1 ]; then
  # Where the idle CPU goes: perf on node 1 for 20 s more (few samples: it is idle).
  perf record -F 999 -g -p "${PID[n1]}" -o "$WORK/idle.data" -- sleep 20 >/dev/null 2>&1 || true
  echo
  echo "idle node 1, perf 20 s at 999 Hz, self time by symbol (top 15):"
  echo '```'
  perf report -i "$WORK/idle.data" --no-children --sort symbol --stdio -g none 2>/dev/null |
    awk '/^ +[0-9.]+%/ && n < 15 { printf "%8s  %s %s\n", $1, $2, $3; n++ }' || true
  echo '```'
  echo "idle node 1, callers by Go function (children, top 25):"
  echo '```'
  perf report -i "$WORK/idle.data" --children --sort symbol --stdio -g none 2>/dev/null |
    awk '/^ +[0-9.]+%/ && $4 ~ /sluice|raft|runtime\.gcBgMarkWorker|runtime\.mcall|time\.|kafka|node/ && n < 25 { printf "%8s  %s\n", $1, $4; n++ }' || true
  echo '```'
fi

# Failover: the kill test's long form (it runs its own 3 nodes).
log "failover: $KILLS kills (TestLeaderKilledUnderLoad)"
cd "$ROOT"
echo
SLUICE_CLUSTER_KILLS=$KILLS go test -count=1 -run 'TestLeaderKilledUnderLoad$' -v -timeout 30m ./internal/cluster/e2e/ 2>&1 |
  grep -E 'round [0-9]+:|failover|acknowledged|log checked|^(--- |ok|FAIL)' || true
