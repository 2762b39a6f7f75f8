# bench/cluster/lib.sh — what the cluster benches share, sourced by run.sh, w2.sh and
# profile.sh after they parsed their flags: a work directory under /tmp removed on exit (but
# for the nodes' logs after a failure), every
# process started recorded in PID and stopped on exit, the binaries built into it, and the
# helpers to start nodes and wait for them. Ports sit below Linux's ephemeral range (32768
# and up, where a client's own port may sit): node i of the cluster uses 2i080 (HTTP),
# 2i092 (Kafka), 2i324 (SQS), 2i095 (Raft), 2i060 (pprof, when asked).
#
#   bench_setup PREFIX      mktemp -d /tmp/PREFIX.XXXXXX into WORK, traps, builds sluice
#                           and sluice-bench into WORK and cd's there
#   log MSG...              a timestamped line on stderr
#   ready NAME HTTP-PORT    waits up to 30 s for /readyz, else prints NAME's log and exits
#   start_node I ARGS...    starts node I of the 3-node cluster (data WORK/nI, log WORK/nI.log)
#                           with ARGS added, recorded as PID[nI]
PEERS="1=127.0.0.1:21095,2=127.0.0.1:22095,3=127.0.0.1:23095"
declare -A PID

bench_cleanup() {
  local rc=$?
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ "$rc" != 0 ] && [ "$rc" != 130 ]; then # a failed run keeps its nodes' logs to read
    rm -rf "$WORK/sluice" "$WORK/sluice-bench" "$WORK"/n?/
    echo "exit $rc: the nodes' logs are kept in $WORK" >&2
    return
  fi
  rm -rf "$WORK"
}

bench_setup() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  go build -o "$WORK/sluice" ./cmd/sluice
  go build -o "$WORK/sluice-bench" ./cmd/sluice-bench
  cd "$WORK"
}

log() { echo "== $(date -u +%H:%M:%S) $*" >&2; }

ready() {
  for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "$1 did not get ready:" >&2; tail -20 "$WORK/$1.log" >&2; exit 1
}

start_node() {
  local i=$1; shift
  ./sluice serve --data-dir "$WORK/n$i" --fsync always --node-id "$i" \
    --cluster-addr "127.0.0.1:2${i}095" --cluster-peers "$PEERS" \
    --http-addr "127.0.0.1:2${i}080" "$@" 2>"$WORK/n$i.log" &
  PID[n$i]=$!
}
