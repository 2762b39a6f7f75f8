#!/usr/bin/env bash
# run1.sh BIN LABEL WORKLOAD(W2|W3) DUR [profile-dir]
set -u
BIN=$1 LABEL=$2 W=$3 DUR=$4 PROF=${5:-}
D=$(mktemp -d /tmp/sqsp/run.XXXX)
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
  ( sleep 2; curl -s "http://127.0.0.1:$pp/debug/pprof/profile?seconds=6" -o $PROF/cpu-$LABEL-$W.pprof ) &
  ( sleep 2; curl -s "http://127.0.0.1:$pp/debug/pprof/mutex?seconds=6" -o $PROF/mutex-$LABEL-$W.pprof ) &
  ( sleep 2; curl -s "http://127.0.0.1:$pp/debug/pprof/block?seconds=6" -o $PROF/block-$LABEL-$W.pprof ) &
fi
/usr/bin/time -f "client cpu %U+%S s" -o $D/ctime /tmp/sqsp/sluice-bench "${ARGS[@]}" --duration $DUR --count 100000000 --protocol ${PROTO:-sqs} --server http://127.0.0.1:$ph --kafka-addr 127.0.0.1:$pk --sqs-url http://127.0.0.1:$ps --probe-dir "" ${NOQUIET:---quiet} -o json > $D/out.json 2>$D/err
wait_pids=$(jobs -p | grep -v "^$SP$"); for j in $wait_pids; do wait $j; done
curl -s http://127.0.0.1:$ph/metrics > $D/metrics.txt; cp $D/metrics.txt /tmp/sqsp/last-metrics.txt; SCPU=$(awk '{printf "%.2f", ($14+$15)/100}' /proc/$SP/stat); kill $SP; wait $SP 2>/dev/null; echo "server cpu $SCPU s; $(cat $D/ctime)"
[ -s $D/out.json ] || { echo "FAILED: $(tail -c 300 $D/err | tr "\r\n" "  ")"; tail -3 $D/log; }
python3 - "$LABEL" "$W" "$D/out.json" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json,sys
try:
  j=json.load(open(sys.argv[3]))
except Exception as e:
  print(sys.argv[1],sys.argv[2],"ERR",e); sys.exit()
def find(o,k):
  if isinstance(o,dict):
    for a,b in o.items():
      if a==k: return b
      r=find(b,k)
      if r is not None: return r
  return None
print(sys.argv[1],sys.argv[2],"load",sys.argv[4],json.dumps(j))
PY
cp $D/err /tmp/sqsp/last-err.txt; cp $D/log /tmp/sqsp/last-log-$LABEL.txt; rm -rf $D
