#!/bin/bash
# w3t.sh BIN OUT PROTO: W3 with a 4 s execution trace of the server and its metrics after
BIN=$1; OUT=$2; PROTO=$3; shift 3
D=$(mktemp -d /tmp/w3/data.XXXX)
SLUICE_PPROF_ADDR=127.0.0.1:16060 $BIN serve --data-dir $D --fsync always --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 >$OUT.server.log 2>&1 &
SP=$!
sleep 1
A="--kafka-addr 127.0.0.1:19092 --server http://127.0.0.1:18080 --sqs-url http://127.0.0.1:19324"
/tmp/w3/sluice-bench latency --protocol $PROTO $A -o json --probe-dir /tmp/w3 --probe-time 300ms --quiet --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration 10s --count 100000000 "$@" >$OUT.json 2>$OUT.err &
BP=$!
sleep 5
curl -s -o $OUT.trace "http://127.0.0.1:16060/debug/pprof/trace?seconds=4"
wait $BP
curl -s http://127.0.0.1:18080/metrics > $OUT.metrics
kill $SP; wait $SP
rm -rf $D
python3 -c "import json;d=json.load(open('$OUT.json'));print(d['result']['latency'],d['result'].get('ack_latency'),d['disk'])"
