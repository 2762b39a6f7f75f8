#!/bin/bash
# serve.sh BIN PORTBASE: starts sluice --fsync always on 127.0.0.1:PORTBASE (http), +1 kafka, +2 sqs; prints its pid; waits until the http port answers.
BIN=$1; PB=$2
D=$(mktemp -d /tmp/ns/run.XXXX)
"$BIN/sluice" serve --data-dir $D/data --http-addr 127.0.0.1:$PB --kafka-addr 127.0.0.1:$((PB+1)) --sqs-addr 127.0.0.1:$((PB+2)) --fsync always > $D/log 2>&1 &
echo $! > /tmp/ns/pid.$PB
for i in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:$PB/readyz && curl -sf -o /dev/null http://127.0.0.1:$PB/readyz && break; sleep 0.2; done
echo "$D"
