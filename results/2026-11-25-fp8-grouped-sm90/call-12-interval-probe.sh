#!/usr/bin/env bash
# Session 13, call 12 (one H200): probe, not landed: the FP8 partial sums promoted every 2 stages
# (256 K) instead of every stage, one wait for all MMAs per pair. This tree vs the probe, same call.
set -uo pipefail
mkdir -p $OUT probe
S="$OUT/summary.txt"
for f in *; do case $f in build-gpu|probe|old) ;; *) cp -r $f probe/;; esac; done
cp devrun/gg_probe.cu probe/kernels/cuda/grouped_gemm.cu
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j8 --target moebench > /tmp/build.log 2>&1 ) &
( cd probe && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-p.log 2>&1 && cmake --build build-gpu -j8 --target moebench moe_cuda_tests > /tmp/build-p.log 2>&1 ) &
wait
[ -x probe/build-gpu/tests/moe_cuda_tests ] || { grep -B2 -A10 error /tmp/build-p.log | head -30; exit 1; }
timeout 100 probe/build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*' > $OUT/probe_tests.txt 2>&1; echo "probe fp8 tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/probe_tests.txt | tr '\n' ' ')" >> $S
grep -E "largest error" $OUT/probe_tests.txt | head -12 >> $S
for c in mixtral_8x7b qwen3_30b_a3b; do
  for b in build-gpu probe/build-gpu build-gpu probe/build-gpu; do
    echo "== $c $b" >> $S
    timeout 80 $b/moebench gemm --config configs/bench/$c.json --ep 1 --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90 --iters 10 > $OUT/g.log 2>&1; grep -E "fp8_tensor:|dense" $OUT/g.log | cut -c1-100 >> $S
  done
done
cat $S
