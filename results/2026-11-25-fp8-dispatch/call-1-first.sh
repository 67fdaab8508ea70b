#!/usr/bin/env bash
# Session 15, call 1 (one H200): dispatch_dtype fp8. GPU tests (the new Fp8RowsCuda among them), tiny
# checks through every dispatcher with and without the pipeline (and the digests against fp8_block
# without it), the Qwen3-30B-A3B check at 256 tokens, and same-call steps fp8_block vs + dispatch fp8.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
grep -E "Fp8RowsCuda" $OUT/logs/gpu_tests.txt >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=fp8_block --set align=16 --steps 3"
for disp in alltoall alltoall_dedup allgather; do
  for ov in none pipeline; do
    for dd in bf16 fp8; do
      n=tiny_${disp}_${ov}_$dd
      timeout 60 $B --set dispatch=$disp --set overlap=$ov --set dispatch_dtype=$dd --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$? $(grep -E '^# check' $OUT/logs/$n.log)" >> $S
      grep -E "^  (out|dx|dw_in|dw_out) " $OUT/logs/$n.log | tr -s ' ' | tr '\n' ';' >> $S; echo >> $S
    done
  done
done
python3 - $OUT/logs >> $S <<'PY'
import json, sys, glob
d = sys.argv[1]
for f in sorted(glob.glob(f"{d}/tiny_*_fp8.json")):
    q = json.load(open(f)); b = json.load(open(f.replace("_fp8.json", "_bf16.json")))
    same = [n for n in ("out", "dx", "dw_out", "dw_in") if q["digests"][n] == b["digests"][n]]
    print(f.split("/")[-1], "digests equal to fp8_block's:", same)
PY
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=first --steps 2 --warmup 1 --backend cuda --set align=16 --set precision=fp8_block --set dispatch_dtype=fp8 > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_block dispatch fp8 rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check|dispatch_dtype fp8" $OUT/logs/qwen3_check.log >> $S
for m in mixtral_8x7b deepseek_v3; do
  for dd in bf16 fp8; do
    timeout 150 build-gpu/moebench run --config configs/bench/$m.json --set tokens_per_rank=8192 --set precision=fp8_block --backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 6 --set dispatch_dtype=$dd > $OUT/logs/${m}_$dd.log 2>&1; echo "== $m fp8_block dispatch_dtype $dd rc=$?" >> $S
    grep -E "^  step |^  dispatch_fwd|^  experts_fwd|^  experts_bwd|memory: high" $OUT/logs/${m}_$dd.log >> $S
  done
done
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
