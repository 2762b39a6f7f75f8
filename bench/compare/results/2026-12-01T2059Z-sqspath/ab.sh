#!/usr/bin/env bash
# ab.sh ROUNDS DUR WORKLOADS... : old/new interleaved
R=$1 DUR=$2; shift 2
for r in $(seq $R); do
  for w in "$@"; do
    for v in old new; do
      echo "round $r $(uptime | sed 's/.*load/load/')"
      /tmp/sqsp/run1.sh /tmp/sqsp/sluice-$v $v $w $DUR
      grep -v "^#" /tmp/sqsp/last-metrics.txt | grep "request_duration_seconds_\(sum\|count\)" | grep -v Queue | tr '\n' ' '; echo
    done
  done
done
