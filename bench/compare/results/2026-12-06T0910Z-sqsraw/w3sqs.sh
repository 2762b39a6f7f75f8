#!/bin/bash
# w3sqs.sh OUT ROUNDS: W3 over SQS (SendMessage per message, 5,000/s, 10 s) against a fresh
# broker per run, aws-sdk-go-v2 sends (sdk) and bare POSTs (raw, --sqs-raw-send)
# alternating; receives and deletes go through the SDK in both. Needs /tmp/sl (sluice) and
# /tmp/sb (sluice-bench) built from the same commit.
OUT=$1; ROUNDS=${2:-3}
mkdir -p $OUT /tmp/w3
for r in $(seq 1 $ROUNDS); do
  for v in sdk raw; do
    D=$(mktemp -d /tmp/w3/data.XXXX)
    /tmp/sl serve --data-dir $D --fsync always --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 >$OUT/$v$r.server.log 2>&1 &
    SP=$!
    sleep 1
    X=""; [ $v = raw ] && X=--sqs-raw-send
    uptime >$OUT/$v$r.load
    /usr/bin/time -f "%U %S" -o $OUT/$v$r.clientcpu /tmp/sb latency --protocol sqs --sqs-url http://127.0.0.1:19324 -o json --probe-dir /tmp/w3 --quiet \
      --size 1024 --consumers 4 --prefetch 64 --rate 5000 --duration 10s --count 100000000 $X >$OUT/$v$r.json 2>$OUT/$v$r.err
    awk '{print $14, $15}' /proc/$SP/stat >$OUT/$v$r.servercpu
    uptime >>$OUT/$v$r.load
    kill $SP; wait $SP
    rm -rf $D
    python3 -c "import json;d=json.load(open('$OUT/$v$r.json'));r=d['result'];print('$v$r', r.get('msgs_per_sec'), r['latency'], r.get('ack_latency'), d['disk'].get('fdatasync_p99_ms', d['disk']))" 2>&1 | cut -c1-400
  done
done
