#!/bin/bash
# profile.sh BINDIR OUTDIR: CPU, mutex, block profiles of the server under native W2, plus
# fdatasync counts (strace -c over 5 s, separate window) and the queue's counters around it.
set -u
BIN=$1; OUT=$2
mkdir -p "$OUT"
D=$(mktemp -d /tmp/w2n/prof.XXXX)
SLUICE_PPROF_ADDR=127.0.0.1:16061 "$BIN/sluice" serve --data-dir "$D/data" --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 --fsync always >"$D/log" 2>&1 &
P=$!
sleep 3
w=W2
args=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64)
"$BIN/sluice-bench" "${args[@]}" --protocol native --duration 24s --count 100000000 --server http://127.0.0.1:18080 --name prof-$w --probe-dir "" --quiet > "$OUT/bench-$w.txt" 2>&1 &
B=$!
sleep 2
curl -s -o "$D/cpu-$w.pprof" "http://127.0.0.1:16061/debug/pprof/profile?seconds=8" &
C=$!
curl -s -o "$D/mutex0-$w.pprof" "http://127.0.0.1:16061/debug/pprof/mutex"; curl -s -o "$D/block0-$w.pprof" "http://127.0.0.1:16061/debug/pprof/block"
wait $C
curl -s -o "$D/mutex-$w.pprof" "http://127.0.0.1:16061/debug/pprof/mutex"; curl -s -o "$D/block-$w.pprof" "http://127.0.0.1:16061/debug/pprof/block"
# fsync count window (strace slows the server; counts per message are what matter)
curl -s http://127.0.0.1:18080/metrics | grep -E '^sluice_queue_(sent|received|acked)_total' > "$OUT/metrics0.txt"
timeout -s INT 5 strace -f -c -e trace=fdatasync,fsync,write,pwrite64,writev,futex -p $P -o "$OUT/strace-$w.txt" 2>/dev/null
curl -s http://127.0.0.1:18080/metrics | grep -E '^sluice_queue_(sent|received|acked)_total' > "$OUT/metrics1.txt"
wait $B
go tool pprof -top -cum -nodecount=60 "$BIN/sluice" "$D/cpu-$w.pprof" > "$OUT/cpu-$w.txt" 2>&1
go tool pprof -top -nodecount=40 "$BIN/sluice" "$D/cpu-$w.pprof" > "$OUT/cpu-flat-$w.txt" 2>&1
go tool pprof -top -nodecount=30 -base "$D/mutex0-$w.pprof" "$BIN/sluice" "$D/mutex-$w.pprof" > "$OUT/mutex-$w.txt" 2>&1
go tool pprof -top -cum -nodecount=40 -base "$D/block0-$w.pprof" "$BIN/sluice" "$D/block-$w.pprof" > "$OUT/block-$w.txt" 2>&1
cp "$D/cpu-$w.pprof" "$OUT/" 
kill $P; wait $P 2>/dev/null
uptime > "$OUT/uptime.txt"
rm -rf "$D"
