import re,collections,sys
b=collections.defaultdict(list);cnt={};sm={}
for l in open(sys.argv[1]):
    m=re.match(r'sluice_request_duration_seconds_bucket\{operation="(\w+)",protocol="(\w+)",le="([^"]+)"\} (\S+)',l)
    if m: b[m.group(2)+'/'+m.group(1)].append((m.group(3),float(m.group(4))))
    m=re.match(r'sluice_request_duration_seconds_(sum|count)\{operation="(\w+)",protocol="(\w+)"\} (\S+)',l)
    if m: (sm if m.group(1)=='sum' else cnt)[m.group(3)+'/'+m.group(2)]=float(m.group(4))
for op in b:
    n=cnt[op]
    if n<10: continue
    qs=[]
    for q in (0.5,0.9,0.99):
        for le,c in b[op]:
            if c>=q*n: qs.append(le);break
    print(op,int(n),'mean %.2fms'%(sm[op]/n*1000),'p50<=',qs[0],'p90<=',qs[1],'p99<=',qs[2])
