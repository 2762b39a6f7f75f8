#!/bin/bash
# w1p.sh BIN OUT PRODUCERS [flags]: W1 over Kafka (256 in flight, 1 partition) with PRODUCERS franz-go clients
BIN=$1; OUT=$2; NP=$3; shift 3
D=$(mktemp -d /tmp/w3/data.XXXX)
$BIN serve --data-dir $D --fsync always --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 >$OUT.server.log 2>&1 &
SP=$!
sleep 1
c0=$(awk '{print $14+$15}' /proc/$SP/stat)
/tmp/w3/sluice-bench produce --protocol kafka --kafka-addr 127.0.0.1:19092 -o json --probe-dir "" --quiet --size 1024 --in-flight 256 --batch 1 --duration 8s --count 100000000 --kafka-producers $NP "$@" >$OUT.json 2>$OUT.err
echo "server_cpu_ticks $(( $(awk '{print $14+$15}' /proc/$SP/stat) - c0 ))" > $OUT.servercpu
curl -s http://127.0.0.1:18080/metrics > $OUT.metrics
kill $SP; wait $SP
rm -rf $D
python3 -c "
import json;d=json.load(open('$OUT.json'));r=d.get('result',d);l=r['latency']
print('$OUT', round(r['msgs_per_sec']), 'p50 %.2f p99 %.2f'%(l['p50_ms'],l['p99_ms']), open('$OUT.servercpu').read().strip())"
grep -E "^sluice_storage_fsync_duration_seconds_count" $OUT.metrics
