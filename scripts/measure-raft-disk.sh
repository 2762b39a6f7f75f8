#!/usr/bin/env bash
# Usage: scripts/measure-raft-disk.sh SLUICE_BINARY MIB
# A 3-node cluster on loopback, MIB MiB of 1 KiB records produced to one partition
# replicated on all three (through Kafka, with sluice-bench: $SLUICE_BENCH, or built from
# this tree), then the disk use of each node's raft/ and topics/ and its replica pull
# metrics (docs/cluster.md, "Replicated partition", "Measured"). Bounded: 300 s of produce.
set -euo pipefail
mib=$2
# shellcheck source=scripts/cluster3.sh
source "$(dirname "$0")/cluster3.sh"
cluster3_init "$1"
for i in 1 2 3; do cluster3_start $i; done
sleep 3
count=$((mib * 1024))
"$bench" produce --protocol kafka --kafka-addr 127.0.0.1:$((base+11)) --size 1024 --replication-factor 3 \
  --count $count --duration 300s --in-flight 256 --batch 64 --probe-dir "" 2>&1 | tail -4
sleep 3
for i in 1 2 3; do
  curl -s 127.0.0.1:$((base+20+i))/metrics | (grep -E "^sluice_replica_pull" || true) | tr '\n' ' '; echo
  grep -iE "level=(WARN|ERROR)" "$root/n$i.log" | cut -c1-300 | sort | uniq -c | sort -rn | head -5 || true
done
for i in 1 2 3; do
  echo "n$i raft $(du -sm "$root/n$i/raft" | cut -f1) MiB, topics $(du -sm "$root/n$i/topics" | cut -f1) MiB (apparent raft $(du -sm --apparent-size "$root/n$i/raft" | cut -f1) MiB)"
done
