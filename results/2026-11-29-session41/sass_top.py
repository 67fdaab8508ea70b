#!/usr/bin/env python3
"""Condense ncu's `--page source --csv --print-source sass` of one kernel: the columns, an opcode
histogram weighted by warp instructions executed, and the top lines by stall samples."""
import csv, sys, collections, re
rows = list(csv.reader(open(sys.argv[1], newline='')))
hdr_i = next(i for i, r in enumerate(rows) if any('Source' == c.strip() for c in r))
hdr = [c.strip() for c in rows[hdr_i]]
print('columns:', hdr)
def col(*names):
    for n in names:
        for i, c in enumerate(hdr):
            if c.startswith(n): return i
    return None
src = col('Source'); addr = col('# Address', 'Address')
exe = col('Warp Instructions Executed', 'Instructions Executed', '# Instructions Executed')
stall = col('Warp Stall Sampling (All Samples)', 'Warp Stall Sampling')
print('using', hdr[src], '|', exe is not None and hdr[exe], '|', stall is not None and hdr[stall])
def num(s):
    try: return float(s.replace(',', ''))
    except Exception: return 0.0
body = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
ops, stalls = collections.Counter(), collections.Counter()
tot_e = tot_s = 0.0
for r in body:
    text = r[src].strip()
    m = re.match(r'(@!?U?P\w+\s+)?([A-Z0-9_.]+)', text)
    op = m.group(2) if m else text[:12]
    base = op.split('.')[0]
    e = num(r[exe]) if exe is not None else 0; s = num(r[stall]) if stall is not None else 0
    ops[base] += e; stalls[base] += s; tot_e += e; tot_s += s
print(f'lines {len(body)} warp instructions {tot_e:.4g} stall samples {tot_s:.4g}')
print('opcode: share of instructions, share of stall samples')
for op, e in ops.most_common(30):
    print(f'  {op:12s} {100*e/max(tot_e,1):5.1f}% {100*stalls[op]/max(tot_s,1):5.1f}%')
print('top lines by stall samples: addr, samples %, executed, text')
for r in sorted(body, key=lambda r: -num(r[stall]))[:45]:
    print(f'  {r[addr] if addr is not None else "":>8} {100*num(r[stall])/max(tot_s,1):5.1f}% {num(r[exe]) if exe is not None else 0:10.0f}  {r[src].strip()[:90]}')
