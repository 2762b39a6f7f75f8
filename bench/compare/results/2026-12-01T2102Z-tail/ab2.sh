#!/bin/bash
# ab2.sh OUTDIR ROUNDS "A B R" — per round, per workload, each variant on a fresh server:
# A,B = /tmp/tail/$v/sluice (--fsync always, Kafka); R = redis-server appendfsync always.
# HOG=1: a bounded dd oflag=dsync loop runs on the same disk for the whole run.
set -u
OUT=$1; ROUNDS=$2; VARS=$3
mkdir -p "$OUT"
hogpid=""
if [ -n "${HOG:-}" ]; then
  mkdir -p /tmp/tail/hog
  ( end=$((SECONDS+1200)); while [ $SECONDS -lt $end ]; do dd if=/dev/zero of=/tmp/tail/hog/f bs=64k count=200 oflag=dsync status=none; done ) &
  hogpid=$!
fi
for r in $(seq 1 "$ROUNDS"); do
  for w in ${WL:-w1p1 w1p8 w3p1 w3p8}; do
    for v in $VARS; do
      d=$(mktemp -d /tmp/tail/run.XXXX)
      case $w in
        w1p*) args=(--size 1024 --in-flight 256 --batch 1 --duration ${DUR:-6s} --count 10000000); wl=produce; p=${w#w1p};;
        w3p*) args=(--size 1024 --in-flight 256 --consumers 4 --prefetch 64 --rate 5000 --duration ${DUR:-6s} --count 10000000); wl=latency; p=${w#w3p};;
      esac
      echo "$(date -u +%T) r$r $v $w load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/progress.log"
      if [ "$v" = R ]; then
        [ "$p" = 1 ] || { rm -rf "$d"; continue; }
        redis-server --bind 127.0.0.1 --port 16399 --dir "$d" --appendonly yes --appendfsync always --save "" --daemonize no --protected-mode yes >"$d/log" 2>&1 &
        pid=$!
        for i in $(seq 50); do (echo >/dev/tcp/127.0.0.1/16399) 2>/dev/null && break; sleep 0.2; done
        /tmp/tail/peerbench run --workload $wl "${args[@]}" --peer redis --addr 127.0.0.1:16399 --label "redis (always)" --name "b-$w" --quiet >"$OUT/$r-$v-$w.json" 2>>"$OUT/progress.log"
      else
        SLUICE_PPROF_ADDR=${PPROF:-} /tmp/tail/$v/sluice serve --data-dir "$d/data" --http-addr 127.0.0.1:18080 --kafka-addr 127.0.0.1:19092 \
          --sqs-addr 127.0.0.1:19324 --fsync always >"$d/log" 2>&1 &
        pid=$!
        for i in $(seq 50); do (echo >/dev/tcp/127.0.0.1/19092) 2>/dev/null && break; sleep 0.2; done
        /tmp/tail/sluice-bench $wl "${args[@]}" --partitions $p --protocol kafka --kafka-addr 127.0.0.1:19092 --server http://127.0.0.1:18080 --name "b-$w" \
          --probe-dir "$d" --probe-time 1s --quiet -o json >"$OUT/$r-$v-$w.json" 2>>"$OUT/progress.log"
      fi
      kill $pid; wait $pid 2>/dev/null
      rm -rf "$d"
    done
  done
done
[ -n "$hogpid" ] && kill $hogpid
rm -rf /tmp/tail/hog
exit 0
