#!/usr/bin/env bash
# cpu.sh ROUNDS RATE DUR: W3 at a fixed rate, old/new interleaved; server CPU per message.
R=$1
for r in $(seq $R); do for v in old new; do
  out=$(RATE=$2 /tmp/sqsp/run1.sh /tmp/sqsp/sluice-$v $v W3 $3)
  echo "$out" | python3 -c '
import sys,re,json
t=sys.stdin.read()
cpu=re.search(r"server cpu ([\d.]+) s; client cpu ([\d.]+)\+([\d.]+)",t)
m=re.search(r"(old|new) W3 load (\S+) (\{.*)",t)
try:
  j=json.loads(m.group(3))["result"]
except Exception:
  j=None
if not (cpu and m and j): print("FAIL", t[-300:].replace("\n"," ")); sys.exit()
n=j["received"]
print("%s load %s recv %d/%d server %.0f us/msg client %.0f us/msg p50 %.2f p99 %.2f max %.2f ms" % (m.group(1), m.group(2), n, j["sent"], float(cpu.group(1))*1e6/n, (float(cpu.group(2))+float(cpu.group(3)))*1e6/n, j["latency"]["p50_ms"], j["latency"]["p99_ms"], j["latency"]["max_ms"]))
'
done; done
