import json, glob, os, re, statistics, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, 'r*-*.json'))):
    m = re.match(r'r(\d+)-(\w+)-(\w+)-(W\d)\.json', os.path.basename(f))
    r, sysn, proto, w = m.groups()
    try:
        res = json.load(open(f))['result']
    except Exception:
        continue
    rows.setdefault((w, sysn, proto), []).append((int(r), res['msgs_per_sec'], res['latency']['p50_ms'], res['latency']['p99_ms']))
names = {('old','native'): 'sluice main, native unary', ('new','native'): 'sluice nativestream, native streams',
         ('old','kafka'): 'sluice main, Kafka', ('new','kafka'): 'sluice nativestream, Kafka', ('redis','resp'): 'Redis appendfsync always'}
print('| workload | target | msgs/s per round | median msgs/s | p99 ms per round | median p99 ms |')
print('|---|---|---|---:|---|---:|')
med = {}
for w in ['W1','W2','W3']:
    for k in [('old','native'),('new','native'),('old','kafka'),('new','kafka'),('redis','resp')]:
        v = rows.get((w,)+k)
        if not v: continue
        v.sort()
        t = [x[1] for x in v]; p = [x[3] for x in v]
        med[(w,)+k] = (statistics.median(t), statistics.median(p))
        print(f"| {w} | {names[k]} | {' / '.join(f'{x:,.0f}' for x in t)} | {statistics.median(t):,.0f} | {' / '.join(f'{x:.2f}' for x in p)} | {statistics.median(p):.2f} |")
print()
def ratio(a, b, i=0):
    if a in med and b in med and med[b][i]:
        return f"{med[a][i]/med[b][i]:.2f}x"
    return 'n/a'
print('| ratio (medians) | value |')
print('|---|---:|')
print('| W1 native streams / W1 Kafka (same binary) |', ratio(('W1','new','native'), ('W1','new','kafka')), '|')
print('| W1 native unary / W1 Kafka (main) |', ratio(('W1','old','native'), ('W1','old','kafka')), '|')
print('| W1 native streams / native unary |', ratio(('W1','new','native'), ('W1','old','native')), '|')
print('| W2 native streams / Redis always |', ratio(('W2','new','native'), ('W2','redis','resp')), '|')
print('| W2 native unary / Redis always |', ratio(('W2','old','native'), ('W2','redis','resp')), '|')
print('| W2 native streams / native unary |', ratio(('W2','new','native'), ('W2','old','native')), '|')
print('| W3 p99 native streams / native unary |', ratio(('W3','new','native'), ('W3','old','native'), 1), '|')
