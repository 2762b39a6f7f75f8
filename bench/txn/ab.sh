#!/usr/bin/env bash
# bench/txn/ab.sh — Kafka transactions per second on a single node, two builds side by side:
# REV (default: HEAD~1) against the work tree, alternated ROUNDS times so that the machine's
# drift falls on both. Each sender is a transactional franz-go producer of its own
# (sluice-bench produce --kafka-transactional): a send is one transaction (begin, produce
# --batch records, commit). 1 KiB records, one partition, --fsync always. Rows: msgs/s,
# transactions/s and a whole transaction's latency (p50/p99).
#
#   bench/txn/ab.sh [--base REV] [--rounds N] [--duration 10s]
#
# Run by hand, never in CI. The brokers listen on 127.0.0.1 and are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PATH:/usr/local/go/bin
BASE=HEAD~1 ROUNDS=2 DUR=10s
while [ $# -gt 0 ]; do
  case $1 in
    --base) BASE=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --duration) DUR=$2; shift ;;
    *) echo "usage: $0 [--base REV] [--rounds N] [--duration 10s]" >&2; exit 2 ;;
  esac
  shift
done
WORK=$(mktemp -d /tmp/sluice-txnab.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  git worktree remove --force "$WORK/base" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "== $(date -u +%H:%M:%S) $*" >&2; }

log "building $BASE and the work tree"
git worktree add -q --detach "$WORK/base" "$BASE"
(cd "$WORK/base" && go build -o "$WORK/sluice-base" ./cmd/sluice)
go build -o "$WORK/sluice-new" ./cmd/sluice
go build -o "$WORK/sluice-bench" ./cmd/sluice-bench

# serve NAME PORT: starts a fresh broker of build NAME on 127.0.0.1:PORT (HTTP on PORT+1).
serve() {
  rm -rf "$WORK/data-$1"
  "$WORK/sluice-$1" serve --data-dir "$WORK/data-$1" --fsync always --log-level warn \
    --http-addr "127.0.0.1:$(($2 + 1))" --kafka-addr "127.0.0.1:$2" --sqs-addr "" 2>"$WORK/$1.log" &
  PIDS+=($!)
  for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$(($2 + 1))/readyz" >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "$1 did not get ready:" >&2; tail -20 "$WORK/$1.log" >&2; exit 1
}

# run NAME PORT SENDERS BATCH ROUND: one table row.
run() {
  local name=$1 port=$2 senders=$3 batch=$4 round=$5
  "$WORK/sluice-bench" produce --kafka-transactional --protocol kafka --size 1024 \
    --in-flight $((senders * batch)) --batch "$batch" --duration "$DUR" --count 100000000 \
    --probe-dir "" --quiet -o json --kafka-addr "127.0.0.1:$port" --partitions 1 \
    --name "t-$name-$senders-$batch-$round" >"$WORK/r.json"
  python3 - "$name" "$senders" "$batch" "$round" "$(cut -d' ' -f1 /proc/loadavg)" "$WORK/r.json" <<'PY'
import json, sys
name, senders, batch, rnd, load, path = sys.argv[1:]
r = json.load(open(path))["result"]
l = r["latency"]
print("| %s | %s × %s | %s | %s | %.0f | %.0f | %.2f | %.2f |" % (name, senders, batch, rnd, load,
      r["msgs_per_sec"], r["msgs_per_sec"] / int(batch), l["p50_ms"], l["p99_ms"]))
PY
}

serve base 22092
serve new 23092
log "$ROUNDS rounds of $DUR: $BASE ($(git rev-parse --short "$BASE")) against the work tree"
echo "| build | senders × records | round | load avg | msgs/s | transactions/s | p50 ms | p99 ms |"
echo "|---|---|---|---|---:|---:|---:|---:|"
for r in $(seq "$ROUNDS"); do
  for shape in "32 1" "8 100" "1 1"; do
    read -r senders batch <<<"$shape"
    # The order alternates per round: neither build always runs second.
    if [ $((r % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
    for b in $order; do
      port=22092; [ "$b" = new ] && port=23092
      run "$b" "$port" "$senders" "$batch" "$r"
    done
  done
done
