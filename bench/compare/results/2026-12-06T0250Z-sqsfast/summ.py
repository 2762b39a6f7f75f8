import json,sys,statistics as st
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
by={}
for r in rows:
    res=r['result']['result']
    cc=r['client'].split()[-2]; u,s=cc.split('+'); ccpu=float(u)+float(s)
    msgs=res['sent']+res['received']
    by.setdefault((r['workload'],r['label']),[]).append((res['msgs_per_sec'],res['sent'],res['received'],res['latency']['p50_ms'],res['latency']['p99_ms'],r['server_cpu_s']*1e6/max(msgs,1),ccpu*1e6/max(msgs,1),r['load']))
for k in sorted(by):
    v=by[k]
    print(k, "runs",len(v))
    for x in v: print("   msgs/s %.0f sent %d recv %d p50 %.0f p99 %.0f ms | server %.0f us, client %.0f us per msg sent+received | load %.1f"%x)
    print("   median msgs/s %.0f, server us/msg %.0f, client us/msg %.0f"%(st.median(x[0] for x in v),st.median(x[5] for x in v),st.median(x[6] for x in v)))
