#!/usr/bin/env bash
# Session 9, call 5: weight gradients with 32-row stages (6 stages + 4 staging boxes, or 7 + 2) and
# tiles decoded a tile ahead, against HEAD, same call.
set -uo pipefail
T0=$(date +%s)
L=$(mktemp -d)
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf devrun/base.tgz -C /tmp/base
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 && cmake --build build-gpu -j8 > $L/build.log 2>&1 ) &
P1=$!
( cmake -S . -B /tmp/b2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DMOE_EXP_BOXES=2 > $L/cmake2.log 2>&1 && cmake --build /tmp/b2 -j4 --target moebench > $L/build2.log 2>&1 ) &
P2=$!
[ -x /tmp/base/build/moebench ] || ( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake_base.log 2>&1 && cmake --build /tmp/base/build -j4 --target moebench > $L/build_base.log 2>&1 )
wait $P1; r1=$?; wait $P2; r2=$?
echo "built new rc=$r1 new2 rc=$r2 in $(( $(date +%s) - T0 )) s" >> $S
[ $r1 = 0 ] || { grep -E "error" -A3 $L/build.log | head -40 >> $S; cat $S; exit 1; }
timeout 240 build-gpu/tests/moe_cuda_tests --gtest_filter='*Grouped*:*ExpertFfn*' > $L/tests.log 2>&1; rc=$?
echo "grouped/ffn gpu tests rc=$rc $(grep -E '^\[  (FAILED|PASSED) ' $L/tests.log | tr '\n' ' ')" >> $S
g() { # name binary config ep tokens dtype
  timeout 150 $2 gemm --config configs/bench/$3.json --ep $4 --set tokens_per_rank=$5 --set expert_grad_dtype=$6 --methods grouped_sm90 --iters 20 -o $L/$1.json > $L/$1.txt 2>&1
  echo "== $1 rc=$? $(grep -E 'wgrad' $L/$1.txt | awk '{printf "%s %s | ", $1, $6}') $(grep -E '^  (up|down|dgrad)' $L/$1.txt | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
echo "== gemm after $(( $(date +%s) - T0 )) s" >> $S
for spec in "deepseek_v3 2 4096" "qwen3_30b_a3b 1 8192" "mixtral_8x7b 1 8192"; do
  set -- $spec
  for dt in bf16 fp32; do
    g ${1}_${dt}_base /tmp/base/build/moebench $1 $2 $3 $dt
    g ${1}_${dt}_new build-gpu/moebench $1 $2 $3 $dt
    g ${1}_${dt}_new2 /tmp/b2/moebench $1 $2 $3 $dt
    g ${1}_${dt}_new2b /tmp/b2/moebench $1 $2 $3 $dt
    g ${1}_${dt}_newb build-gpu/moebench $1 $2 $3 $dt
    g ${1}_${dt}_baseb /tmp/base/build/moebench $1 $2 $3 $dt
  done
done
echo "all done after $(( $(date +%s) - T0 )) s" >> $S
cd $L && rm -f build*.log && tar czf $OUT/s9c.tgz .
cat $S
