# scripts/cluster3.sh — sourced by the measure-*.sh scripts: a 3-node cluster of sluice on
# loopback, each node's data and log under a temporary folder. After `cluster3_init BIN`:
# $root (the folder, removed at exit with every node stopped), $bench (sluice-bench:
# $SLUICE_BENCH, or built from this tree), $base (node i listens for peers on base+i, Kafka
# on base+10+i, HTTP on base+20+i, SQS on base+30+i), pids[i]; `cluster3_start i` starts
# node i (again).
cluster3_init() {
  bin=$1
  root=$(mktemp -d)
  bench=${SLUICE_BENCH:-}
  if [ -z "$bench" ]; then
    bench=$root/sluice-bench
    (cd "$(dirname "${BASH_SOURCE[0]}")/.." && go build -o "$bench" ./cmd/sluice-bench)
  fi
  base=$((20000 + RANDOM % 20000))
  peers="1=127.0.0.1:$((base+1)),2=127.0.0.1:$((base+2)),3=127.0.0.1:$((base+3))"
  declare -gA pids=()
  trap 'kill ${pids[*]} 2>/dev/null; wait 2>/dev/null; rm -rf "$root"' EXIT
}

cluster3_start() {
  "$bin" serve --data-dir "$root/n$1" --node-id "$1" --cluster-addr 127.0.0.1:$((base+$1)) --cluster-peers "$peers" \
    --kafka-addr 127.0.0.1:$((base+10+$1)) --http-addr 127.0.0.1:$((base+20+$1)) --sqs-addr 127.0.0.1:$((base+30+$1)) \
    >>"$root/n$1.log" 2>&1 &
  pids[$1]=$!
}
