#!/usr/bin/env bash
# Usage: scripts/measure-restart.sh SLUICE_BINARY MIB [kill|term]
# How long a cluster node takes to come back with a big partition: a 3-node cluster on
# loopback, MIB MiB of 1 KiB records produced through Kafka to one partition replicated on
# all three (sluice-bench: $SLUICE_BENCH, or built from this tree), then node 3 stopped
# (SIGKILL, or SIGTERM with "term"), the page cache dropped (root), node 3 started again:
# the time until its /readyz answers 200, and until its replica of the partition has
# applied everything committed (/v1/admin/cluster). Bounded: 300 s of produce, 300 s of
# waiting (docs/benchmarks.md, "restarts without a scan").
set -euo pipefail
mib=$2; how=${3:-kill}
# shellcheck source=scripts/cluster3.sh
source "$(dirname "$0")/cluster3.sh"
cluster3_init "$1"
for i in 1 2 3; do cluster3_start $i; done
sleep 3
"$bench" produce --protocol kafka --kafka-addr 127.0.0.1:$((base+11)) --size 1024 --replication-factor 3 \
  --count $((mib * 1024)) --duration 300s --in-flight 256 --batch 64 --probe-dir "" 2>&1 | tail -2
sleep 5
status() { curl -s "127.0.0.1:$((base+20+$1))/v1/admin/cluster" || true; }
# the partition's group: the one with the highest commit index on node 1
group=$(status 1 | python3 -c 'import json,sys; s=json.load(sys.stdin); print(max(s["partitions"], key=lambda p: p["commit"])["group"])')
commit=$(status 1 | python3 -c "import json,sys; s=json.load(sys.stdin); print([p['commit'] for p in s['partitions'] if p['group']==$group][0])")
echo "node 3 holds $(du -sm "$root/n3/topics" | cut -f1) MiB of topics; group $group committed to $commit"
if [ "$how" = term ]; then kill -TERM "${pids[3]}"; else kill -KILL "${pids[3]}"; fi
wait "${pids[3]}" 2>/dev/null || true
sync
if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
t0=$(date +%s.%N)
cluster3_start 3
ready=""
for _ in $(seq 3000); do
  if [ -z "$ready" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' 127.0.0.1:$((base+23))/readyz)" = 200 ]; then
    ready=$(echo "$(date +%s.%N) - $t0" | bc)
  fi
  applied=$(status 3 | python3 -c "import json,sys
try:
  s=json.load(sys.stdin); print([p['applied'] for p in s['partitions'] if p['group']==$group][0])
except Exception: print(0)")
  if [ -n "$ready" ] && [ "$applied" -ge "$commit" ]; then
    echo "node 3 after $how: ready in ${ready}s, the partition applied to $applied in $(echo "$(date +%s.%N) - $t0" | bc)s"
    grep -iE "level=(WARN|ERROR)" "$root/n3.log" | sed -E 's/^time=[^ ]+ //' | cut -c1-200 | sort | uniq -c | sort -rn | head -5 || true
    exit 0
  fi
  sleep 0.1
done
echo "node 3 did not come back within 300 s (ready: ${ready:-no})"; exit 1
