#!/bin/bash
# prof.sh BIN OUTDIR workload(w1p1|w3p1...) — CPU, mutex, block profile of the server under it.
set -u
BIN=$1; OUT=$2; w=$3
mkdir -p "$OUT"
d=$(mktemp -d /tmp/tail/prof.XXXX)
SLUICE_PPROF_ADDR=127.0.0.1:16060 $BIN serve --data-dir "$d/data" --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 \
  --sqs-addr 127.0.0.1:19324 --fsync always >"$d/log" 2>&1 &
pid=$!
for i in $(seq 50); do (echo >/dev/tcp/127.0.0.1/19092) 2>/dev/null && break; sleep 0.2; done
case $w in
  w1p*) args=(produce --size 1024 --in-flight 256 --batch 1 --duration 12s --count 100000000 --partitions ${w#w1p});;
  w3p*) args=(latency --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration 12s --count 10000000 --partitions ${w#w3p});;
esac
/tmp/tail/sluice-bench "${args[@]}" --protocol kafka --kafka-addr 127.0.0.1:19092 --server http://127.0.0.1:18080 --name "b-$w" \
  --probe-dir "" --quiet >"$OUT/$w-bench.txt" 2>&1 &
bp=$!
sleep 2
curl -s "http://127.0.0.1:16060/debug/pprof/mutex" -o /dev/null
curl -s "http://127.0.0.1:16060/debug/pprof/block" -o /dev/null
curl -s "http://127.0.0.1:16060/debug/pprof/profile?seconds=8" -o "$OUT/$w-cpu.pprof"
curl -s "http://127.0.0.1:16060/debug/pprof/mutex" -o "$OUT/$w-mutex.pprof"
curl -s "http://127.0.0.1:16060/debug/pprof/block" -o "$OUT/$w-block.pprof"
wait $bp
kill $pid; wait $pid 2>/dev/null
for k in cpu mutex block; do
  go tool pprof -top -cum -nodecount=45 $BIN "$OUT/$w-$k.pprof" >"$OUT/$w-$k.txt" 2>/dev/null
done
rm -rf "$d"
