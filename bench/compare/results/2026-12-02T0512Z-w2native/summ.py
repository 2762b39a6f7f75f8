import json,glob,sys,statistics,re,collections
out=sys.argv[1]
rows=collections.defaultdict(list)
for f in sorted(glob.glob(out+'/r*-W2.json')):
    m=re.match(r'.*/r(\d+)-(.*)-W2.json',f)
    try:
        d=json.load(open(f))
    except Exception as e:
        print('bad',f,e); continue
    if isinstance(d,list): d=d[0]
    d=d.get('result',d)
    rows[m.group(2)].append((int(m.group(1)),d))
for k,v in rows.items():
    v.sort(key=lambda x:x[0])
    ms=[x[1].get('msgs_per_sec',0) for x in v]
    print(f"{k:8s} msgs/s per round: {' / '.join(f'{x:,.0f}' for x in ms)}  median {statistics.median(ms):,.0f}")
if 'redis' in rows:
    rm=statistics.median([x[1]['msgs_per_sec'] for x in rows['redis']])
    for k,v in rows.items():
        print(f"{k} / redis = {statistics.median([x[1]['msgs_per_sec'] for x in v])/rm:.2f}x")
    # per-round ratios
    byr={r:d['msgs_per_sec'] for r,d in rows['redis']}
    for k,v in rows.items():
        if k=='redis': continue
        print(k, 'per-round ratio:', ' '.join(f"{d['msgs_per_sec']/byr[r]:.2f}" for r,d in v if r in byr))
