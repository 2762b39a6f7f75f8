#!/usr/bin/env bash
# bench/idle/single.sh OLD_SLUICE NEW_SLUICE SLUICE_BENCH [SECONDS]
#
# Idle CPU of a single node holding 1,000 partitions of one record each, two
# binaries side by side in the same window (so the machine's load is the same for
# both): each gets its own data directory and ports, 1,000 records through Kafka
# (sluice-bench, one per partition), 10 s to settle, then SECONDS (60) of CPU from
# /proc/<pid>/stat. CLUSTER=1 runs each as a one-node cluster (--node-id 1: the
# reconciler, Raft groups and the cluster's maintenance, without peers). Run by hand;
# never in CI. Builds nothing: pass the binaries, e.g.
#   git worktree add /tmp/old <rev> && (cd /tmp/old && go build -o /tmp/sluice-old ./cmd/sluice)
#   go build -o /tmp/sluice-new ./cmd/sluice && go build -o /tmp/sluice-bench ./cmd/sluice-bench
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,12p "$0" >&2; exit 2; }
OLD=$1 NEW=$2 BENCH=$3 SECS=${4:-60}
WORK=$(mktemp -d /tmp/sluice-idle.XXXXXX)
PIDS=()
cluster() { [ "${CLUSTER:-0}" = 1 ] && echo --node-id 1 --cluster-addr "127.0.0.1:$1" --cluster-peers "1=127.0.0.1:$1"; true; }
trap 'kill -9 "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; } # user+system clock ticks (10 ms)
"$OLD" serve --data-dir "$WORK/old" --kafka-addr 127.0.0.1:31092 --http-addr 127.0.0.1:31080 --sqs-addr 127.0.0.1:31324 $(cluster 31095) 2>"$WORK/old.log" &
PIDS+=($!)
"$NEW" serve --data-dir "$WORK/new" --kafka-addr 127.0.0.1:32092 --http-addr 127.0.0.1:32080 --sqs-addr 127.0.0.1:32324 $(cluster 32095) 2>"$WORK/new.log" &
PIDS+=($!)
sleep 3
for port in 31092 32092; do
  "$BENCH" produce --size 1024 --in-flight 64 --batch 1 --count 1000 --partitions 1000 --protocol kafka \
    --kafka-addr 127.0.0.1:$port --name idle --duration 120s --probe-dir "" --quiet -o json >/dev/null
done
sleep 10
b1=$(cpu "${PIDS[0]}"); b2=$(cpu "${PIDS[1]}"); t0=$(date +%s.%N)
sleep "$SECS"
a1=$(cpu "${PIDS[0]}"); a2=$(cpu "${PIDS[1]}"); t1=$(date +%s.%N)
python3 -c 'import sys; b1,a1,b2,a2,t0,t1=map(float,sys.argv[1:]); d=t1-t0; print("idle, 1,000 partitions, over %.0f s, %% of one core: old %.2f, new %.2f" % (d,(a1-b1)/d,(a2-b2)/d))' \
  "$b1" "$a1" "$b2" "$a2" "$t0" "$t1"
