#!/bin/bash
# ab.sh OUTDIR ROUNDS PROTO "ENV_A" "ENV_B": W3 rounds alternating server environments A and B
OUT=$1; N=$2; PROTO=$3; EA=$4; EB=$5
mkdir -p $OUT
for r in $(seq 1 $N); do
  for v in A B; do
    E=$EA; [ $v = B ] && E=$EB
    echo -n "round $r $v ($E): "
    env $E ./w3.sh ${BIN:-/tmp/w3/sluice} $OUT/$v$r $PROTO
  done
done
