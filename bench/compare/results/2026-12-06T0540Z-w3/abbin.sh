#!/bin/bash
# abbin.sh OUTDIR ROUNDS PROTO BIN_A BIN_B [bench flags]: W3 rounds alternating two server binaries
OUT=$1; N=$2; PROTO=$3; A=$4; B=$5; shift 5
mkdir -p $OUT
for r in $(seq 1 $N); do
  for v in A B; do
    BIN=$A; [ $v = B ] && BIN=$B
    echo -n "round $r $v: "
    ./w3.sh $BIN $OUT/$v$r $PROTO "$@" | python3 -c "
import sys,ast
s=sys.stdin.read().strip().split('} {')
print(s[0][-90:], '|', s[1][-90:], '|', s[2][-110:])"
  done
done
