#!/usr/bin/env bash
# Session 15, call 6 (one H200): the review mend (fp8_rows_to_gemm's code copy through copy_row;
# allgather's packed Dims; the chunk's token count). GPU tests, tiny dispatch-fp8 checks through every
# dispatcher with and without the pipeline (digests against fp8_block), the Qwen3-30B-A3B check.
set -uo pipefail
START=$(date +%s)
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built at $(( $(date +%s) - START )) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $OUT/logs/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/gpu_tests.txt | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED|Failure|exception" $OUT/logs/gpu_tests.txt | head -20 >> $S
B="build-gpu/moebench run --config configs/tiny.json --backend cuda --set precision=fp8_block --set align=16 --steps 3"
for disp in alltoall alltoall_dedup allgather; do
  for ov in none pipeline; do
    for dd in bf16 fp8; do
      n=tiny_${disp}_${ov}_$dd
      timeout 60 $B --set dispatch=$disp --set overlap=$ov --set dispatch_dtype=$dd --out $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$? $(grep -E '^# check' $OUT/logs/$n.log)" >> $S
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
timeout 150 build-gpu/moebench run --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 --set check=first --steps 2 --warmup 1 --backend cuda --set align=16 --set precision=fp8_block --set dispatch_dtype=fp8 > $OUT/logs/qwen3_check.log 2>&1; echo "== qwen3 check fp8_block dispatch fp8 rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out) |^# check" $OUT/logs/qwen3_check.log >> $S
echo "done at $(( $(date +%s) - START )) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
