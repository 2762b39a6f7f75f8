#!/bin/bash
# abprod.sh OUTDIR ROUNDS OLD NEW "NP..." : W1 over Kafka, 1 partition, with NP franz-go producers, old and new alternating
OUT=$1; N=$2; OLD=$3; NEW=$4; NPS=$5
mkdir -p $OUT
for r in $(seq 1 $N); do
  echo "round $r $(date -u +%T) $(cat /proc/loadavg)" >> $OUT/uptime.log
  for np in $NPS; do
    for v in old new; do
      BIN=$OLD; [ $v = new ] && BIN=$NEW
      ./w1p.sh $BIN $OUT/$v-p$np-r$r $np | head -1
    done
  done
done
