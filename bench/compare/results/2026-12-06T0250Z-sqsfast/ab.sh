#!/usr/bin/env bash
# ab.sh OUT ROUNDS DUR: main's sluice and this branch's alternated, in each
# round W2, W3 at 5,000/s and W3 at 2,000/s over SQS, same flags
# (run1.sh); one JSON line a run in OUT/runs.jsonl (label: build, or
# build@rate for W3 at 2,000/s). Run under `flock /work/bench.lock`.
set -u
OUT=$1 ROUNDS=$2 DUR=$3
B=${SQSJ:-/tmp/sqsfast}
mkdir -p $OUT
for r in $(seq $ROUNDS); do
  for v in main new; do $B/run1.sh $B/sluice-$v $v W2 $DUR | tee -a $OUT/runs.jsonl | cut -c1-120; done
  for v in main new; do $B/run1.sh $B/sluice-$v $v W3 $DUR | tee -a $OUT/runs.jsonl | cut -c1-120; done
  for v in main new; do RATE=2000 $B/run1.sh $B/sluice-$v $v@2000 W3 $DUR | tee -a $OUT/runs.jsonl | cut -c1-120; done
done
