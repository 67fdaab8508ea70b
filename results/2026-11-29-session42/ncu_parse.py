#!/usr/bin/env python3
"""Condense `ncu --csv --metrics ...` output mixed with moebench's own lines (call 3): one line per
profiled launch, in launch order, with its duration in us and each metric (bytes in MB, rates in
millions). Usage: ncu_parse.py FILE.csv"""
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10 and r[0] in ('ID',) or (len(r) > 10 and r[0].isdigit())]
h = rows[0]; K = h.index('Kernel Name'); N = h.index('Metric Name'); V = h.index('Metric Value'); I = h.index('ID')
per = collections.defaultdict(dict)
for r in rows[1:]:
    per[(r[I], r[K])][r[N]] = float(r[V].replace(',', ''))
for (i, k), m in sorted(per.items(), key=lambda x: int(x[0][0])):
    lay = (re.findall(r'GroupedLayout\)(\d)', k) or ['?'])[0]
    us = m.get('gpu__time_duration.sum', 0) / 1e3
    out = f'  {i:>4} layout {lay} {us:8.1f} us'
    for n, v in m.items():
        if n == 'gpu__time_duration.sum': continue
        if 'bytes' in n: v = v / 1e6
        if 'per_second' in n: v = v / 1e6
        out += f"  {n.split('__')[1][:22]}={v:.4g}"
    print(out)
