#!/usr/bin/env bash
# Session 14, call 2 (one H200): FP8 mainloop in straight-line chunks (wait for all but the last
# stage, add the one before; drain once per chunk) of 4 (this tree) and 8 stages (probe) against
# HEAD (drain every stage), same call.
set -uo pipefail
mkdir -p $OUT probe old
S="$OUT/summary.txt"
for f in *; do case $f in build-gpu|probe|old) ;; *) cp -r $f probe/;; esac; done
cp devrun/gg_chunk8.cu probe/kernels/cuda/grouped_gemm.cu
tar xzf devrun/old.tgz -C old
B() { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-$1.log 2>&1 && cmake --build build-gpu -j6 --target moebench moe_cuda_tests > /tmp/build-$1.log 2>&1; }
B tree & (cd probe && B probe) & (cd old && B old) &
wait
for d in . probe old; do [ -x $d/build-gpu/moebench ] || { echo "build $d failed"; grep -B2 -A10 error /tmp/build-*.log | head -30; exit 1; }; done
for d in . probe; do
  timeout 120 $d/build-gpu/tests/moe_cuda_tests > $OUT/tests_$(basename $(realpath $d)).txt 2>&1; echo "$d tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/tests_$(basename $(realpath $d)).txt | tr '\n' ' ')" >> $S
done
grep -E "largest error" $OUT/tests_*.txt | head -30 >> $S
for c in mixtral_8x7b qwen3_30b_a3b deepseek_v3; do
  T=8192; [ $c = deepseek_v3 ] && T=4096
  for b in old . probe old . probe; do
    echo "== $c $b" >> $S
    timeout 80 $b/build-gpu/moebench gemm --config configs/bench/$c.json --ep 1 --set tokens_per_rank=$T --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90 --iters 10 > $OUT/g.log 2>&1; grep -E "fp8_tensor:|dense" $OUT/g.log | cut -c1-100 >> $S
  done
done
cat $S
