#!/bin/bash
# cpu.sh BINDIR: native W2 10 s; prints bench line, server and client CPU seconds, machine idle share.
set -u
BIN=$1
D=$(mktemp -d /tmp/w2n/cpu.XXXX)
"$BIN/sluice" serve --data-dir "$D/data" --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 --sqs-addr 127.0.0.1:19324 --fsync always >"$D/log" 2>&1 &
P=$!
sleep 3
cpu() { awk '{print ($14+$15)/100}' /proc/$1/stat; }
idle0=$(awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
s0=$(cpu $P)
"$BIN/sluice-bench" queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64 --protocol native --duration 10s --count 100000000 --server http://127.0.0.1:18080 --name c --probe-dir "" --quiet -o json > $D/out.json 2>&1 &
B=$!
sleep 9
c1=$(cpu $B); s1=$(cpu $P)
idle1=$(awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
wait $B
python3 -c "import json;d=json.load(open('$D/out.json'))['result'];print(d['msgs_per_sec'],d['sent'],d['received'])"
echo "server cpu s (9s window from start): $(echo "$s1 - $s0" | bc)  client cpu s: $c1"
echo "$idle0 $idle1" | awk '{printf "machine idle %.0f%%\n", 100*($3-$1)/($4-$2)}'
kill $P; wait $P 2>/dev/null; rm -rf $D
