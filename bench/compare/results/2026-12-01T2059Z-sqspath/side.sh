#!/usr/bin/env bash
# side.sh ROUNDS DUR: W2 and W3, sluice main vs sqspath over SQS, beside RabbitMQ quorum and Redis always, interleaved.
set -u
R=$1 DUR=$2
ROOT=/work/wt/sqspath
WORK=$(mktemp -d /tmp/sqsp/side.XXXX); chmod 755 $WORK
source $ROOT/bench/compare/peers.sh
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count 100000000)
W3=(latency --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration "$DUR" --count 100000000)
start_rabbitmq || { echo rabbit failed; tail $LOGF; exit 1; }; RSTOP=$CURRENT_STOP; RADDR=$ADDR; CURRENT_STOP=""
start_redis always || exit 1; DSTOP=$CURRENT_STOP; DADDR=$ADDR; CURRENT_STOP=""
trap 'eval "$RSTOP"; eval "$DSTOP"' EXIT
peer() { # peer addr label W flags...
  local p=$1 a=$2 l=$3 w=$4; shift 4
  local wl=$1; shift
  local extra=(); [ $p = rabbitmq ] && extra=(--rabbit-queue-type quorum)
  echo "$l $w load $(cut -d' ' -f1 /proc/loadavg) $(/tmp/sqsp/peerbench run --workload $wl "$@" --peer $p --addr $a --label "$l" --name bench-$wl-$RANDOM "${extra[@]}" 2>/dev/null | tr -d '\n' | cut -c1-700)"
}
for r in $(seq $R); do
  for w in W2 W3; do
    eval "ARGS=(\"\${$w[@]}\")"
    echo "== round $r $w"
    /tmp/sqsp/run1.sh /tmp/sqsp/sluice-old old $w $DUR | grep -v "^server cpu"
    /tmp/sqsp/run1.sh /tmp/sqsp/sluice-new new $w $DUR | grep -v "^server cpu"
    peer rabbitmq $RADDR rabbitmq-quorum $w "${ARGS[@]}"
    peer redis $DADDR redis-always $w "${ARGS[@]}"
  done
done
