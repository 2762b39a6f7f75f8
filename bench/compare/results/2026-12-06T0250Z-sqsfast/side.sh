#!/usr/bin/env bash
# side.sh ROUNDS DUR: W2 over SQS with main's sluice and this branch's
# (run1.sh), beside RabbitMQ's quorum queue (peerbench, started as
# bench/compare/peers.sh does), interleaved in each round. One JSON line a
# sluice run in $B/side-runs.jsonl, one result line a RabbitMQ run. Run
# under `flock /work/bench.lock`.
set -u
R=$1 DUR=$2
B=${SQSJ:-/tmp/sqsfast}
ROOT=${ROOT:-/work/wt-sqs}
WORK=$(mktemp -d $B/side.XXXX); chmod 755 $WORK
source $ROOT/bench/compare/peers.sh
W2=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration "$DUR" --count 100000000)
start_rabbitmq || { echo rabbit failed; tail $LOGF; exit 1; }; RSTOP=$CURRENT_STOP; RADDR=$ADDR; CURRENT_STOP=""
trap 'eval "$RSTOP"' EXIT
for r in $(seq $R); do
  echo "== round $r"
  $B/run1.sh $B/sluice-main main W2 $DUR | tee -a $B/side-runs.jsonl | cut -c1-100
  $B/run1.sh $B/sluice-new new W2 $DUR | tee -a $B/side-runs.jsonl | cut -c1-100
  echo "rabbitmq-quorum W2 load $(cut -d' ' -f1 /proc/loadavg) $($B/peerbench run --workload queue "${W2[@]:1}" --peer rabbitmq --addr $RADDR --label rabbitmq-quorum --name bench-q-$RANDOM --rabbit-queue-type quorum --quiet 2>/dev/null | tr -d "\n")" | tee -a $B/side-rabbit.txt
done
