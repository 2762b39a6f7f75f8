#!/usr/bin/env python3
# summ.py DIR: per round, msgs/s and server / client CPU µs per message of each variant (ab.sh's output).
import json, glob, re, sys, os
d = sys.argv[1]
rows, cpu, cl = {}, {}, {}
for f in glob.glob(os.path.join(d, 'r*.json')):
    m = re.match(r'r(\d+)-(\w+)\.json', os.path.basename(f))
    res = json.load(open(f))['result']
    rows.setdefault(int(m.group(1)), {})[m.group(2)] = (res['msgs_per_sec'], res['sent'])
for l in open(os.path.join(d, 'cpu.log')):
    p = l.split(); cpu[(int(p[0][1:]), p[1])] = int(p[3]) * 10_000  # ticks of 10 ms, in µs
for l in open(os.path.join(d, 'clientcpu.log')):
    p = l.split()
    if p and p[0].startswith('r'): cl[(int(p[0][1:]), p[1])] = (float(p[3]) + float(p[4])) * 1e6
for r in sorted(rows):
    out = f"r{r}"
    for v in ('kafka', 'native', 'batches'):
        if v in rows[r]:
            rate, sent = rows[r][v]
            out += f" | {v} {rate:,.0f}/s server {cpu.get((r, v), 0)/sent:.1f} µs client {cl.get((r, v), 0)/sent:.1f} µs"
    print(out)
