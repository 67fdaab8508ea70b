#!/usr/bin/env python3
# Sums ncu's gpu__time_duration per kernel (short name) from a --csv file; prints the top rows.
import csv, sys, re, collections
rows = [l for l in open(sys.argv[1], errors='replace')]
start = next((i for i, l in enumerate(rows) if l.startswith('"ID"')), None)
if start is None:
    print('no ncu table'); sys.exit(0)
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in csv.DictReader(rows[start:]):
    if r.get('Metric Name') != 'gpu__time_duration.sum': continue
    v = float(r['Metric Value'].replace(',', ''))
    unit = r.get('Metric Unit', '')
    us = v / 1000 if unit.startswith('n') else v * 1000 if unit.startswith('m') else v
    name = r['Kernel Name']
    name = re.sub(r'\(.*', '', name)
    name = re.sub(r'<.*', '', name)
    tot[name] += us; cnt[name] += 1
all_us = sum(tot.values())
print(f'total {all_us/1000:.3f} ms over {sum(cnt.values())} kernels')
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    print(f'  {v/1000:8.3f} ms {cnt[k]:5d}x  {k[:90]}')
