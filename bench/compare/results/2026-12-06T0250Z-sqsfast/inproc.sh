#!/usr/bin/env bash
# inproc.sh ROUNDS: the old and new sqs test binaries alternated, one run of
# each benchmark per round; output in /tmp/sqsfast/inproc-{old,new}.txt.
cd ${ROOT:-/work/wt-sqs}/internal/sqs
for r in $(seq $1); do
  for v in old new; do
    echo "# round $r $v load $(cut -d' ' -f1 /proc/loadavg)" >> /tmp/sqsfast/inproc-$v.txt
    /tmp/sqsfast/sqs-$v.test -test.run '^$' -test.bench 'SendMessage|HandlerRoundTrip|HTTPReceiveMessage|DecodeJSON' -test.benchmem -test.count 1 -test.benchtime 1s >> /tmp/sqsfast/inproc-$v.txt 2>&1
  done
done
