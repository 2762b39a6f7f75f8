#!/bin/bash
# w2sqs.sh BIN OUT [DUR]: W2 over SQS with profiles of the server (cpu 5 s, mutex, block) from second 2
BIN=$1; OUT=$2; DUR=${3:-10s}
D=$(mktemp -d /tmp/w3/data.XXXX)
SLUICE_PPROF_ADDR=127.0.0.1:16060 $BIN serve --data-dir $D --fsync always --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 >$OUT.server.log 2>&1 &
SP=$!
sleep 1
c0=$(awk '{print $14+$15}' /proc/$SP/stat)
/usr/bin/time -f "client_cpu_s %U %S" -o $OUT.clientcpu /tmp/w3/sluice-bench queue --protocol sqs --sqs-url http://127.0.0.1:19324 -o json --probe-dir "" --quiet --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --duration $DUR --count 100000000 >$OUT.json 2>$OUT.err &
BP=$!
sleep 2
curl -s -o $OUT.mutex0 "http://127.0.0.1:16060/debug/pprof/mutex"
curl -s -o $OUT.block0 "http://127.0.0.1:16060/debug/pprof/block"
curl -s -o $OUT.cpu "http://127.0.0.1:16060/debug/pprof/profile?seconds=5"
curl -s -o $OUT.mutex1 "http://127.0.0.1:16060/debug/pprof/mutex"
curl -s -o $OUT.block1 "http://127.0.0.1:16060/debug/pprof/block"
wait $BP
echo "server_cpu_ticks $(( $(awk '{print $14+$15}' /proc/$SP/stat) - c0 ))" > $OUT.servercpu
curl -s http://127.0.0.1:18080/metrics > $OUT.metrics
kill $SP; wait $SP
rm -rf $D
python3 -c "import json;d=json.load(open('$OUT.json'));r=d.get('result',d);print(round(r['msgs_per_sec']), r['sent'], r['received'], r['latency'])"
cat $OUT.clientcpu $OUT.servercpu
