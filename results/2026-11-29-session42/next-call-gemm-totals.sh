#!/usr/bin/env bash
# Prepared in session 42 (one H200; not run: the device budget was spent). `moebench gemm`'s
# totals (gemm-totals.diff: app/gemm_totals.{h,cpp}, wired into app/gemm_command.cpp, a CPU unit
# test tests/cpu/test_gemm_totals.cpp that passes here, docs/usage.md): the six expert GEMMs'
# sums per method and at the fastest method of each, and with an FP8 precision the recipe's
# speedup over bf16's. Land the diff if both runs print a `# totals` line per arithmetic whose sums
# match their rows (checked below from the JSON), the FP8 run with `speedup_vs_bf16`. Copy to
# devrun/ and run from the repository root with BUILD_COMMIT ("<full 40-digit commit> 1") carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
git apply results/2026-11-29-session42/gemm-totals.diff; echo "apply rc=$?" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
timeout 120 $B gemm --config bench/mixtral_8x7b --set precision=fp8_tensor --set align=16 --set expert_grad_dtype=bf16 --methods lt_multistream,grouped_sm90 --iters 5 --out $L/mx.json > $L/mx.log 2>&1
echo "== mixtral fp8_tensor rc=$? at $(el) s" >> $S; grep -E '^# totals' $L/mx.log >> $S
timeout 120 $B gemm --config bench/qwen3_30b_a3b --set align=16 --methods grouped_sm90 --iters 5 --out $L/qw.json > $L/qw.log 2>&1
echo "== qwen3 bf16 rc=$? at $(el) s" >> $S; grep -E '^# totals' $L/qw.log >> $S
for f in mx qw; do
  python3 - $L/$f.json >> $S 2>&1 <<'PY'
import json, sys, collections
j = json.load(open(sys.argv[1]))
rows = [g for g in j['gemms'] if g['gemm'] not in ('dense', 'weights')]
for t in j['totals']:
    fp8 = t['precision'] != 'bf16'
    mine = [g for g in rows if (':' in g['method']) == fp8]
    for m, s in t['methods'].items():
        want = sum(g['median_ms'] for g in mine if g['method'] == m)
        print(t['precision'], m, 'sum', round(s['ms'], 4), 'rows', round(want, 4), 'ok' if abs(s['ms'] - want) < 1e-9 else 'MISMATCH')
    best = collections.defaultdict(lambda: 1e30)
    for g in mine: best[g['gemm']] = min(best[g['gemm']], g['median_ms'])
    print(t['precision'], 'fastest_each', round(t['fastest_each']['ms'], 4), 'rows', round(sum(best.values()), 4), 'speedup', t['speedup_vs_bf16'])
PY
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
