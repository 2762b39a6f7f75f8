#!/bin/bash
# w3.sh BIN OUT PROTO [extra bench flags]: one W3 run against a fresh broker
BIN=$1; OUT=$2; PROTO=$3; shift 3
D=$(mktemp -d /tmp/w3/data.XXXX)
$BIN serve --data-dir $D --fsync always --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 >$OUT.server.log 2>&1 &
SP=$!
sleep 1
A="--kafka-addr 127.0.0.1:19092 --server http://127.0.0.1:18080 --sqs-url http://127.0.0.1:19324"
/tmp/w3/sluice-bench latency --protocol $PROTO $A -o json --probe-dir /tmp/w3 --quiet --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration 10s --count 100000000 "$@" >$OUT.json 2>$OUT.err
kill $SP; wait $SP
rm -rf $D
python3 -c "import json;d=json.load(open('$OUT.json'));print(d['result']['latency'],d['result'].get('ack_latency'),d['disk'])"
