#!/usr/bin/env bash
# Prepared in session 42 (one H200; not run): the next session's first call, both prepared diffs
# in one build (they touch different files): dynamic-schedule.diff (part 1 of
# next-call-dynamic-schedule.sh: every GPU test both ways, digests static against dynamic, a
# graph check, the GEMMs both ways) and gemm-totals.diff (whose `# totals` lines the GEMM runs
# print, checked against their rows from the JSON). Then next-call-dynamic-schedule-2.sh on the
# same machine if the schedule held. Land gemm-totals.diff if its lines check; the schedule as
# next-call-dynamic-schedule.sh says. Copy to devrun/ and run from the repository root with
# BUILD_COMMIT ("<full 40-digit commit> 1") carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session42
git apply $R/dynamic-schedule.diff; echo "apply dynamic rc=$?" >> $S
git apply $R/gemm-totals.diff; echo "apply totals rc=$?" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-dyn
for d in 1 0; do
  MOE_EXP_DYNAMIC=$d timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests-dyn$d.log 2>&1
  echo "GPU tests MOE_EXP_DYNAMIC=$d rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-dyn$d.log | tr '\n' ' ')" >> $S
  grep -E '^\[  FAILED|Failure|Expected|Which is' $L/tests-dyn$d.log | head -10 >> $S
  [ $(el) -gt 300 ] && break
done
for c in qw ds mxfp8; do for d in 1 0; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mxfp8) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024 --set precision=fp8_tensor";;
  esac
  MOE_EXP_DYNAMIC=$d timeout 90 /tmp/mb-dyn run --backend cuda $args --set gemm.method=grouped_sm90 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$d.json > $L/dig-$c-$d.log 2>&1
  echo "== digests $c dynamic $d rc=$? at $(el) s" >> $S
done
python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); print('digests equal:', a.get('digests')==b.get('digests'))" $L/dig-$c-1.json $L/dig-$c-0.json >> $S 2>&1
done
MOE_EXP_DYNAMIC=1 timeout 120 /tmp/mb-dyn run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph.log 2>&1
echo "== check graph dynamic rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph.log)" >> $S
for r in 1 2; do for d in 1 0; do for w in qw ds mxfp8; do
  [ $(el) -gt 540 ] && break 3
  case $w in
    qw) a="--config bench/qwen3_30b_a3b";;
    ds) a="--config bench/deepseek_v3 --ep 2";;
    mxfp8) a="--config bench/mixtral_8x7b --set precision=fp8_tensor";;
  esac
  MOE_EXP_DYNAMIC=$d timeout 60 /tmp/mb-dyn gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 --out $L/gemm-$w-$d-$r.json > $L/gemm-$w-$d-$r.log 2>&1
  echo "== gemm $w dynamic $d round $r rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-$w-$d-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-$w-$d-$r.log)" >> $S
  grep -E '^# totals' $L/gemm-$w-$d-$r.log >> $S
  python3 - $L/gemm-$w-$d-$r.json >> $S 2>&1 <<'PY'
import json, sys, collections
j = json.load(open(sys.argv[1]))
rows = [g for g in j['gemms'] if g['gemm'] not in ('dense', 'weights')]
bad = 0
for t in j['totals']:
    mine = [g for g in rows if (':' in g['method']) == (t['precision'] != 'bf16')]
    for m, s in t['methods'].items():
        bad += abs(s['ms'] - sum(g['median_ms'] for g in mine if g['method'] == m)) > 1e-9
    best = collections.defaultdict(lambda: 1e30)
    for g in mine: best[g['gemm']] = min(best[g['gemm']], g['median_ms'])
    bad += abs(t['fastest_each']['ms'] - sum(best.values())) > 1e-9
print('totals check against the rows:', 'ok' if bad == 0 else f'{bad} MISMATCHES')
PY
done; done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
