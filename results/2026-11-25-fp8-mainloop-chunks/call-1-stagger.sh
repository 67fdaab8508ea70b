#!/usr/bin/env bash
# Session 14, call 1 (one H200): FP8 warpgroups staggered (warpgroup 1 issues each stage after
# warpgroup 0) against the tree, same call; cuBLASLt's FP8 kernel for Mixtral's up projection (ncu).
set -uo pipefail
mkdir -p $OUT probe
S="$OUT/summary.txt"
for f in *; do case $f in build-gpu|probe|old) ;; *) cp -r $f probe/;; esac; done
cp devrun/gg_stagger.cu probe/kernels/cuda/grouped_gemm.cu
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j8 --target moebench > /tmp/build.log 2>&1 ) &
( cd probe && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-p.log 2>&1 && cmake --build build-gpu -j8 --target moebench moe_cuda_tests > /tmp/build-p.log 2>&1 ) &
wait
[ -x probe/build-gpu/tests/moe_cuda_tests ] || { grep -B2 -A10 error /tmp/build-p.log | head -30; exit 1; }
timeout 100 probe/build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*:*Grouped*' > $OUT/probe_tests.txt 2>&1; echo "probe tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/probe_tests.txt | tr '\n' ' ')" >> $S
grep -E "FAILED|largest error" $OUT/probe_tests.txt | head -12 >> $S
for c in mixtral_8x7b qwen3_30b_a3b deepseek_v3; do
  T=8192; [ $c = deepseek_v3 ] && T=4096
  for b in build-gpu probe/build-gpu build-gpu probe/build-gpu; do
    echo "== $c $b" >> $S
    timeout 80 $b/moebench gemm --config configs/bench/$c.json --ep 1 --set tokens_per_rank=$T --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90 --iters 10 > $OUT/g.log 2>&1; grep -E "fp8_tensor:|dense" $OUT/g.log | cut -c1-100 >> $S
  done
done
G="build-gpu/moebench gemm --config configs/bench/mixtral_8x7b.json --ep 1 --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods lt_multistream --iters 1"
timeout 150 ncu --launch-skip 40 --launch-count 12 --section LaunchStats --section SpeedOfLight --section Occupancy $G > $OUT/ncu_lt.txt 2>&1; echo "ncu rc=$?" >> $S
grep -E "^  [a-zA-Z_].*\(|Registers Per|Block Size|Grid Size|Cluster Size|Dynamic Shared|Duration|Compute \(SM\) Throughput|Memory Throughput" $OUT/ncu_lt.txt | head -120 >> $S
gzip -f $OUT/ncu_lt.txt
cat $S
