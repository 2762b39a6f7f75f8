#!/usr/bin/env bash
# run1.sh BIN LABEL WORKLOAD(W2|W3) DUR [profile-dir]
# One `sluice serve --fsync always` from BIN, the workload over SQS with
# sluice-bench (the flags of bench/compare/run.sh), the result with the
# server's and the client's CPU; with a folder, CPU and allocation profiles
# of the server (6 s from the 2nd second). Wrap in `flock /work/bench.lock`.
set -u
BIN=$1 LABEL=$2 W=$3 DUR=$4 PROF=${5:-}
B=${SQSJ:-/tmp/sqsfast}
D=$(mktemp -d $B/run.XXXX)
read ph pk ps pp < <(python3 -c "import socket
ss=[socket.socket() for _ in range(4)]
[x.bind(('127.0.0.1',0)) for x in ss]
print(*[x.getsockname()[1] for x in ss])")
env ${PROF:+SLUICE_PPROF_ADDR=127.0.0.1:$pp} $BIN serve --data-dir $D/data --http-addr 127.0.0.1:$ph --kafka-addr 127.0.0.1:$pk --sqs-addr 127.0.0.1:$ps --fsync always >$D/log 2>&1 &
SP=$!
for i in $(seq 150); do (echo >/dev/tcp/127.0.0.1/$ps) 2>/dev/null && break; sleep 0.2; done
if [ "$W" = W2 ]; then ARGS=(queue --size 1024 --in-flight 256 --batch 1 --consumers 4 --prefetch 64)
else ARGS=(latency --size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate ${RATE:-5000}); fi
if [ -n "$PROF" ]; then
  mkdir -p $PROF
  ( sleep 2; curl -s "http://127.0.0.1:$pp/debug/pprof/profile?seconds=${PSEC:-6}" -o $PROF/cpu-$LABEL-$W.pprof ) &
  ( sleep 2; curl -s "http://127.0.0.1:$pp/debug/pprof/allocs?seconds=${PSEC:-6}" -o $PROF/allocs-$LABEL-$W.pprof ) &
fi
S0=$(awk '{print $14+$15}' /proc/$SP/stat)
/usr/bin/time -f "client cpu %U+%S s" -o $D/ctime $B/sluice-bench "${ARGS[@]}" --duration $DUR --count 100000000 --protocol sqs --server http://127.0.0.1:$ph --kafka-addr 127.0.0.1:$pk --sqs-url http://127.0.0.1:$ps --probe-dir "" --quiet -o json > $D/out.json 2>$D/err
for j in $(jobs -p | grep -v "^$SP$"); do wait $j; done
SCPU=$(awk -v s0=$S0 '{printf "%.2f", ($14+$15-s0)/100}' /proc/$SP/stat); kill $SP; wait $SP 2>/dev/null
[ -s $D/out.json ] || { echo "FAILED: $(tail -c 300 $D/err | tr "\r\n" "  ")"; tail -3 $D/log; }
python3 - "$LABEL" "$W" "$D/out.json" "$(cut -d' ' -f1 /proc/loadavg)" "$SCPU" "$(cat $D/ctime)" <<'PY'
import json,sys
label,w,f,load,scpu,ccpu=sys.argv[1:7]
try:
  j=json.load(open(f))
except Exception as e:
  print(label,w,"ERR",e); sys.exit()
print(json.dumps({"label":label,"workload":w,"load":float(load),"server_cpu_s":float(scpu),"client":ccpu,"result":j}))
PY
rm -rf $D
