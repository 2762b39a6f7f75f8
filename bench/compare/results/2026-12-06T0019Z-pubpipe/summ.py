import json,glob,sys,statistics,re,collections
out=sys.argv[1]
rows=collections.defaultdict(dict)  # (label,proto) -> round -> result
for f in sorted(glob.glob(out+'/r*-W1.json')):
    m=re.match(r'.*/r(\d+)-(.*)-(native|kafka)-W1.json',f)
    try:
        d=json.load(open(f))
    except Exception as e:
        print('bad',f,e); continue
    if isinstance(d,list): d=d[0]
    d=d.get('result',d)
    rows[(m.group(2),m.group(3))][int(m.group(1))]=d
cpu={}
for line in open(out+'/cpu.log'):
    r,l,p,_,t=line.split(); cpu[(l,p,int(r[1:]))]=int(t)
labels=sorted({k[0] for k in rows})
print('| build | protocol | msgs/s per round | median msgs/s | p99 ms per round | median p99 ms | server CPU s per round |')
print('|---|---|---|---:|---|---:|---|')
for l in labels:
    for p in ('native','kafka'):
        v=rows.get((l,p),{})
        rs=sorted(v)
        ms=[v[r].get('msgs_per_sec',0) for r in rs]
        p99=[v[r]['latency']['p99_ms'] for r in rs]
        c=[cpu.get((l,p,r),0)/100 for r in rs]
        print(f"| {l} | {p} | {' / '.join(f'{x:,.0f}' for x in ms)} | {statistics.median(ms):,.0f} | {' / '.join(f'{x:.2f}' for x in p99)} | {statistics.median(p99):.2f} | {' / '.join(f'{x:.1f}' for x in c)} |")
print()
print('| build | native / Kafka per round (same server, same round) | median of rounds | ratio of medians |')
print('|---|---|---:|---:|')
for l in labels:
    n,k=rows[(l,'native')],rows[(l,'kafka')]
    rr=[n[r]['msgs_per_sec']/k[r]['msgs_per_sec'] for r in sorted(n) if r in k]
    mm=statistics.median([x['msgs_per_sec'] for x in n.values()])/statistics.median([x['msgs_per_sec'] for x in k.values()])
    print(f"| {l} | {' / '.join(f'{x:.2f}' for x in rr)} | {statistics.median(rr):.2f} | {mm:.2f} |")
w3=collections.defaultdict(dict)
for f in sorted(glob.glob(out+'/r*-native-W3.json')):
    m=re.match(r'.*/r(\d+)-(.*)-native-W3.json',f)
    try:
        d=json.load(open(f))
    except Exception as e:
        continue
    d=d.get('result',d); w3[m.group(2)][int(m.group(1))]=d
if w3:
    print()
    print('| build | W3 native msgs/s per round | p50 ms per round | p99 ms per round | median p99 ms |')
    print('|---|---|---|---|---:|')
    for l in sorted(w3):
        v=w3[l]; rs=sorted(v)
        ms=' / '.join('%s' % format(v[r]['msgs_per_sec'], ',.0f') for r in rs)
        p50=' / '.join('%.2f' % v[r]['latency']['p50_ms'] for r in rs)
        p99=' / '.join('%.2f' % v[r]['latency']['p99_ms'] for r in rs)
        med=statistics.median([v[r]['latency']['p99_ms'] for r in rs])
        print(f"| {l} | {ms} | {p50} | {p99} | {med:.2f} |")
