#!/bin/bash
# xlinger.sh OUT: one new2 server; W1 native with the Publisher's adaptive linger, a fixed 200us, never (-1), and W1 Kafka, 3 rounds
OUT=$1; mkdir -p $OUT
D=$(mktemp -d /tmp/pub/run.XXXX)
/tmp/pub/new2/sluice serve --data-dir $D/data --http-addr 127.0.0.1:18580 --kafka-addr 127.0.0.1:18581 --sqs-addr 127.0.0.1:18582 --fsync always > $D/log 2>&1 &
pid=$!
for i in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:18580/readyz && break; sleep 0.2; done
for r in 1 2 3; do
  echo "round $r $(cat /proc/loadavg)" >> $OUT/uptime.log
  for cfg in adaptive 200us kafka; do
    if [ $cfg = kafka ]; then proto=kafka; L=""; else proto=native; L=$cfg; fi
    [ $cfg = adaptive ] && L=0s
    XPUB_LINGER=$L timeout 60 /tmp/pub/xb/sluice-bench  # 2c95efe with a throw-away XPUB_LINGER override of PublisherOptions.Linger produce --size 1024 --in-flight 256 --batch 1 --duration 8s --count 100000000 --protocol $proto \
      --server http://127.0.0.1:18580 --kafka-addr 127.0.0.1:18581 --probe-dir "" --quiet -o json --name x-$cfg-$r > $OUT/r$r-$cfg.json 2>>$OUT/errors.log
    python3 -c "import json;d=json.load(open('$OUT/r$r-$cfg.json'))['result'];print('r$r $cfg', round(d['msgs_per_sec']), d['latency']['p99_ms'])" >> $OUT/results.txt
  done
done
kill $pid; wait $pid 2>/dev/null; rm -rf $D
