import csv,sys,re,collections
rows=[l for l in open(sys.argv[1]) if l.startswith('"')]
r=list(csv.reader(rows))
hdr=r[0]; data=r[1:]
ki=hdr.index("Kernel Name"); mi=hdr.index("Metric Name"); vi=hdr.index("Metric Value"); ui=hdr.index("Metric Unit"); ii=hdr.index("ID")
K=collections.OrderedDict()
for d in data:
    k=K.setdefault(d[ii],{"name":d[ki]})
    v=float(d[vi].replace(',',''))
    u=d[ui]
    if u in('nsecond','ns'): v/=1e3
    if u=='usecond': pass
    if u=='msecond': v*=1e3
    if u=='byte': v/=1e6
    if u=='Kbyte': v/=1e3
    if u=='Gbyte': v*=1e3
    if u=='Mbyte': pass
    if 'hz' in u.lower():
        v={'hz':1e-6,'khz':1e-3,'mhz':1,'ghz':1e3}[u.lower()]*v
    k[d[mi]]=v
agg=collections.OrderedDict()
tot=0
for id,k in K.items():
    n=k["name"]
    short=re.sub(r'^void ','',n); short=re.sub(r'\(.*','',short); short=re.sub(r'moe::cuda::|moe::|\(anonymous namespace\)::','',short)[:90]
    if 'sm90_xmma' in n or 'gemm' in n.lower() and 'grouped' not in n: short='cublas:'+re.sub(r'<.*','',n)[:40]
    a=agg.setdefault(short,[0,0,0,0,0])
    t=k['gpu__time_duration.sum']; a[0]+=1; a[1]+=t; a[2]+=k['dram__bytes_read.sum']; a[3]+=k['dram__bytes_write.sum']; a[4]+=k['sm__cycles_elapsed.avg.per_second']*t
    tot+=t
print(f"total {tot/1e3:.3f} ms over {len(K)} kernels")
for s,a in sorted(agg.items(),key=lambda x:-x[1][1]):
    gb=(a[2]+a[3])/1e3
    print(f"{a[1]/1e3:8.3f} ms n={a[0]:3d} rd {a[2]/1e3:7.3f} GB wr {a[3]/1e3:7.3f} GB  {gb/(a[1]/1e6)/1e3 if a[1] else 0:6.2f} TB/s  {a[4]/a[1] if a[1] else 0:6.0f} MHz  {s}")
