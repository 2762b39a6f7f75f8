#!/bin/bash
# fsyncs.sh BINDIR OUT: fdatasyncs per file and queue counters over a 4 s strace window of native W2.
set -u
BIN=$1; OUT=$2
D=$(mktemp -d /tmp/w2n/fs.XXXX)
"$BIN/sluice" serve --data-dir "$D/data" --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 --fsync always >"$D/log" 2>&1 &
P=$!
sleep 3
"$BIN/sluice-bench" queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --protocol native --duration 12s --count 100000000 --server http://127.0.0.1:18080 --name fs --probe-dir "" --quiet > "$OUT.bench" 2>&1 &
B=$!
sleep 4
curl -s http://127.0.0.1:18080/metrics | grep -E '^sluice_queue_(sent|received|acked)_total' > "$OUT.m0"
timeout -s INT 4 strace -f -y -e trace=fdatasync -p $P -o "$OUT.strace" 2>/dev/null
curl -s http://127.0.0.1:18080/metrics | grep -E '^sluice_queue_(sent|received|acked)_total' > "$OUT.m1"
wait $B
kill $P; wait $P 2>/dev/null
rm -rf "$D"
grep -o '<[^>]*>' "$OUT.strace" | sed 's/[0-9]\{20\}/N/' | sort | uniq -c
paste "$OUT.m0" "$OUT.m1"
