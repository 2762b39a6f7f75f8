#!/usr/bin/env bash
# bench/compare/run.sh — sluice side by side with NATS JetStream, RabbitMQ,
# Redis Streams and PostgreSQL on this machine, through each one's own Go
# client and the same load engine (bench/compare/load). Run by hand, as
# root on Debian; never in CI. It installs what is missing, starts every
# broker on 127.0.0.1 with data under a temporary folder, stops everything
# it started (trap), and writes bench/compare/results/<UTC date>/:
# index.tsv and one JSON per row, results.md, results.json.
#
#   bench/compare/run.sh [--quick] [--smoke] [--only "sluice nats rabbitmq redis postgres"]
#
# --quick: W4's backlog is 1 million messages instead of 10 million.
# --smoke: 1 s workloads and a tiny backlog, to check the script itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export PATH=$PATH:/usr/local/go/bin

NATS_VERSION=v2.15.2 # nats-server, through the Go module proxy
QUICK=0 SMOKE=0
ONLY="sluice nats rabbitmq redis postgres"
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1 ;;
    --smoke) SMOKE=1 ;;
    --only) ONLY=$2; shift ;;
    *) echo "usage: $0 [--quick] [--smoke] [--only \"systems\"]" >&2; exit 2 ;;
  esac
  shift
done
DUR=10s BACKLOG=10000000
[ "$QUICK" = 1 ] && BACKLOG=1000000
[ "$SMOKE" = 1 ] && DUR=1s BACKLOG=20000
COUNT=100000000 # far above what 10 s can reach: the duration ends W1–W3

STAMP=$(date -u +%Y-%m-%dT%H%MZ)
OUT=$ROOT/bench/compare/results/$STAMP
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/sluice-compare.XXXXXX)
chmod 755 "$WORK" # PostgreSQL's user must reach its folder
CURRENT_STOP=""
# shellcheck source=bench/compare/peers.sh
source "$ROOT/bench/compare/peers.sh"
cleanup() {
  stop_current
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "== $(date -u +%H:%M:%S) $*" >&2; }

install() {
  local missing=() p
  for p in rabbitmq-server redis-server postgresql; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq
    # The packages must not start system-wide services: this run starts its own.
    local guard=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && guard=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >"$WORK/apt.log" 2>&1 || { tail "$WORK/apt.log"; exit 1; }
    [ "$guard" = 1 ] && rm -f /usr/sbin/policy-rc.d
  fi
  mkdir -p "$WORK/bin"
  log "building sluice and the harness; nats-server $NATS_VERSION"
  go build -o "$WORK/bin/sluice" ./cmd/sluice
  go build -o "$WORK/bin/sluice-bench" ./cmd/sluice-bench
  go build -o "$WORK/bin/peerbench" ./bench/compare/peerbench
  go test -c -o "$WORK/bin/sluice-bench.test" ./cmd/sluice-bench
  GOBIN=$WORK/bin go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
}

# row W system config protocol sync-before-ack durability file
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT/index.tsv"; }

# The workloads, the same for every system: a name, then its flags.
W1=(produce --size 1024 --in-flight 256 --batch 1 --duration "$DUR" --count "$COUNT")
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count "$COUNT")
W3=(latency --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration "$DUR" --count "$COUNT")
W4=(produce --queue --size 1024 --in-flight 800 --batch 100 --duration 15m --count "$BACKLOG")

fail() { log "FAILED: $*"; echo "- $*" >>"$OUT/failures.md"; }

# bench system config protocol sync durability W workload… — one row,
# through sluice-bench for sluice and peerbench for a peer.
bench() {
  local sys=$1 cfg=$2 proto=$3 sync=$4 dur=$5 w=$6; shift 6
  local file; file=$(echo "$sys-$cfg-$proto-$w.json" | tr ' :/' '___')
  log "$w $sys ($cfg) over $proto"
  echo "== $w $sys ($cfg) over $proto" >>"$OUT/progress.log"
  local name=$1; shift
  local ok=1
  if [ "$sys" = sluice ]; then
    "$WORK/bin/sluice-bench" "$name" "$@" --protocol "$proto" "${SLUICE_FLAGS[@]}" --name "bench-$name" \
      --probe-dir "" -o json >"$OUT/$file" 2>>"$OUT/progress.log" || ok=0
  else
    "$WORK/bin/peerbench" run --workload "$name" "$@" --peer "$sys" --addr "$ADDR" --label "$sys ($cfg)" \
      --name "bench-$name" "${PEER_FLAGS[@]}" >"$OUT/$file" 2>>"$OUT/progress.log" || ok=0
  fi
  if [ "$ok" = 1 ]; then
    row "$w" "$sys" "$cfg" "$proto" "$sync" "$dur" "$file"
  else
    fail "$w $sys ($cfg) over $proto: $(tail -1 "$OUT/progress.log")"
  fi
}

# w123 system config protocols-for-W1 protocols-for-W2 protocols-for-W3 sync durability
w123() {
  local sys=$1 cfg=$2 p1=$3 p2=$4 p3=$5 sync=$6 dur=$7 p
  for p in $p1; do bench "$sys" "$cfg" "$p" "$sync" "$dur" W1 "${W1[@]}"; done
  for p in $p2; do bench "$sys" "$cfg" "$p" "$sync" "$dur" W2 "${W2[@]}"; done
  for p in $p3; do bench "$sys" "$cfg" "$p" "$sync" "$dur" W3 "${W3[@]}"; done
}

# w4 system config protocol sync durability: on the freshly started
# broker, its memory empty, a backlog written, its memory again.
w4() {
  local sys=$1 cfg=$2 proto=$3 base; base=$(echo "$sys-$cfg-W4" | tr ' :/' '___')
  "$WORK/bin/peerbench" mem --pid "$BPID" >"$OUT/$base-empty.json" || { fail "W4 $sys: memory"; return; }
  local before; before=$(wc -l <"$OUT/index.tsv" 2>/dev/null || echo 0)
  bench "$sys" "$cfg" "$proto" "$4" "$5" W4fill "${W4[@]}"
  [ "$(wc -l <"$OUT/index.tsv")" -gt "$before" ] || return 0
  sed -i '$d' "$OUT/index.tsv" # the fill's row becomes W4's
  sleep 5                      # let the broker settle (flushes, GC)
  "$WORK/bin/peerbench" mem --pid "$BPID" >"$OUT/$base-full.json" || { fail "W4 $sys: memory"; return; }
  row W4 "$sys" "$cfg" "$proto" "$4" "$5" "$(echo "$sys-$cfg-$proto-W4fill.json" | tr ' :/' '___'),$base-empty.json,$base-full.json"
}

# profile W1|W2: sluice's CPU profile of that workload (--fsync always,
# broker in-process with the client: TestBenchProfile in cmd/sluice-bench).
profile() {
  log "CPU profile of sluice's $1"
  if ! (cd "$WORK" && TMPDIR=$WORK SLUICE_BENCH_PROFILE=$1 "$WORK/bin/sluice-bench.test" -test.run '^TestBenchProfile$' \
    -test.count=1 -test.v -test.cpuprofile "$WORK/cpu-$1.pprof" >"$OUT/profile-$1.txt" 2>&1); then
    fail "profile $1: $(tail -1 "$OUT/profile-$1.txt")"
    return
  fi
  {
    echo; echo "## top functions by own CPU time"
    go tool pprof -top -nodecount=25 "$WORK/bin/sluice-bench.test" "$WORK/cpu-$1.pprof" 2>/dev/null
    echo; echo "## sluice's call paths by cumulative CPU time"
    go tool pprof -top -cum -nodecount=40 -focus=sluice-mq/sluice/internal "$WORK/bin/sluice-bench.test" "$WORK/cpu-$1.pprof" 2>/dev/null
  } >>"$OUT/profile-$1.txt"
}

started() { # what start_…: run a start_* command, or record why it failed
  local what=$1; shift
  local try
  # Ports are picked free but another program may take one first: retry.
  for try in 1 2 3; do
    LOGF=""
    if "$@"; then return 0; fi
    [ "$try" -lt 3 ] && stop_current
  done
  fail "$what could not be started; the last lines of its log:"
  { echo '```'; tail -n 15 "${LOGF:-/dev/null}"; echo '```'; } >>"$OUT/failures.md"
  stop_current
  return 1
}

meta() {
  local sha; sha=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- . 2>/dev/null || sha="$sha (with uncommitted changes)"
  {
    echo "Run $STAMP: \`bench/compare/run.sh $*\` at sluice $sha."
    echo
    echo "- Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) memory, Linux $(uname -r); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "- W1–W3 run $DUR each; W4's backlog is $BACKLOG messages of 1 KiB ($([ "$QUICK" = 1 ] && echo "--quick" || echo "full size"))."
    echo "- Client and brokers share the machine; every broker listens on 127.0.0.1 only, with its data in a temporary folder on the same disk."
    echo "- Versions: sluice $sha; nats-server $("$WORK/bin/nats-server" --version | awk '{print $NF}'); RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server) on Erlang $(dpkg-query -W -f='${Version}' erlang-base); Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2); PostgreSQL $("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/postgres" --version | awk '{print $3}'); $(go version | awk '{print $3}')."
    echo "- Clients: $(go list -m github.com/twmb/franz-go github.com/aws/aws-sdk-go-v2/service/sqs github.com/nats-io/nats.go github.com/rabbitmq/amqp091-go github.com/redis/go-redis/v9 github.com/jackc/pgx/v5 | tr '\n' ';' | sed 's/;$//; s/;/; /g')."
  } >"$OUT/meta.md"
}

install
meta "$@"
log "results in $OUT"
"$WORK/bin/peerbench" probe --dir "$WORK" --time 2s >"$OUT/disk.json"
log "disk: $(cat "$OUT/disk.json" | tr -d '\n ')"
: >"$OUT/index.tsv"
source "$ROOT/bench/compare/plan.sh"
"$WORK/bin/peerbench" report --dir "$OUT"
"$WORK/bin/peerbench" probe --dir "$WORK" --time 2s >"$OUT/disk-after.json"
log "done: $OUT/results.md"
