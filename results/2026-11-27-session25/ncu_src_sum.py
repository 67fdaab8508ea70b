#!/usr/bin/env python3
# Summarize ncu's source page (SASS, warp stall samples): totals by reason, top instructions.
import csv, sys, gzip
f = gzip.open(sys.argv[1], 'rt') if sys.argv[1].endswith('.gz') else open(sys.argv[1])
lines = f.read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"Address"'))
rows = list(csv.reader(lines[start:]))
hdr = rows[0]; rows = [r for r in rows[1:] if len(r) == len(hdr) and r[0] != 'Address']
ix = {h: i for i, h in enumerate(hdr)}
S = ix['Warp Stall Sampling (All Samples)']
reasons = [h for h in hdr if h.startswith('stall_') and '(Not Issued)' not in h]
num = lambda v: float(v) if v not in ('', '-') else 0.0
tot = sum(num(r[S]) for r in rows)
print(f'instructions {len(rows)}, samples {tot:.0f}')
by = {h: sum(num(r[ix[h]]) for r in rows) for h in reasons}
print('by reason:', ', '.join(f'{h[6:]} {100*v/tot:.1f}%' for h, v in sorted(by.items(), key=lambda x: -x[1]) if v > 0.005 * tot))
top = sorted(range(len(rows)), key=lambda i: -num(rows[i][S]))[:int(sys.argv[2]) if len(sys.argv) > 2 else 30]
for i in sorted(top):
  r = rows[i]
  main = sorted(((num(r[ix[h]]), h[6:]) for h in reasons), reverse=True)[:2]
  print(f'{i:5d} {100*num(r[S])/tot:5.1f}% {r[1].strip()[:70]:70s} ' + ' '.join(f'{n} {100*v/tot:.1f}' for v, n in main if v > 0))
