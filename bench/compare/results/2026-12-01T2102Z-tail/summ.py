import json,glob,sys,statistics as st,os,re
d=sys.argv[1]
rows={}
for f in sorted(glob.glob(d+'/*.json')):
    m=re.match(r'(\d+)-(\w+)-(\w+)\.json',os.path.basename(f))
    r,v,w=m.groups()
    try: j=json.load(open(f))
    except Exception: continue
    res=j['result'];lat=res['latency'];dk=j.get('disk') or {}
    rows.setdefault((w,v),[]).append((int(r),res['msgs_per_sec'],lat['p50_ms'],lat['p99_ms'],lat['p999_ms'],dk.get('fdatasync_p99_ms',0),dk.get('fdatasync_per_sec',0)))
print("| workload | build | rounds | msgs/s median (min–max) | p50 ms | p99 ms median (min–max) | p99.9 ms | disk fdatasync p99 ms (median) | disk fdatasync/s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for (w,v),xs in sorted(rows.items()):
    md=lambda i: st.median([x[i] for x in xs])
    mn=lambda i: min(x[i] for x in xs); mx=lambda i: max(x[i] for x in xs)
    print(f"| {w} | {v} | {len(xs)} | {md(1):,.0f} ({mn(1):,.0f}–{mx(1):,.0f}) | {md(2):.2f} | {md(3):.2f} ({mn(3):.2f}–{mx(3):.2f}) | {md(4):.2f} | {md(5):.2f} | {md(6):,.0f} |")
print()
print("per round:")
for (w,v),xs in sorted(rows.items()):
    print(w,v,' '.join(f"r{x[0]}:{x[1]:.0f}/p99 {x[3]:.2f}/disk {x[5]:.2f}" for x in sorted(xs)))
