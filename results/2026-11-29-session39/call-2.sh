#!/usr/bin/env bash
# Session 39, call 2: the grouped kernel skips MMAs whose products are never stored (a row GEMM's
# 64-row halves past a group's last row; a weight gradient's K steps past it). New tree (the
# working tree) against old (devrun/skip.diff reversed), same call, alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
mkdir -p /tmp/old && tar cf - --exclude=./build-gpu --exclude=./build-old . | (cd /tmp/old && tar xf -)
(cd /tmp/old && git apply -R devrun/skip.diff) && echo "old tree made" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cmake -S /tmp/old -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-old.log 2>&1 &&
  cmake --build /tmp/build-old -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
timeout 240 build-gpu/tests/moe_cuda_tests --gtest_filter='*Grouped*:ExpertFfn*:*Fp8*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure' $L/tests.log | head -20 >> $S
NEW=build-gpu/moebench OLD=/tmp/build-old/moebench
gemm() {  # tag bin config [more]
  local n=$1 b=$2 c=$3; shift 3
  timeout 90 $b gemm --config bench/$c --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  [a-z_]+ +(fp8_[a-z]+:)?grouped_sm90' $L/$n.log | awk '{print $1, $6}' | tr '\n' ' ')" >> $S
}
step() {  # tag bin config [more]
  local n=$1 b=$2 c=$3; shift 3
  timeout 100 $b run --backend cuda --config bench/$c --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --steps 20 --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log) $(grep -E '^# expert GEMMs' $L/$n.log | cut -c1-40)" >> $S
  grep -E 'error' $L/$n.log | head -3 >> $S
}
for r in 1 2; do
  gemm qw-gemm-new-$r $NEW qwen3_30b_a3b --rows routed
  gemm qw-gemm-old-$r $OLD qwen3_30b_a3b --rows routed
done
for r in 1 2; do
  gemm ds2-gemm-old-$r $OLD deepseek_v3 --ep 2 --rows routed
  gemm ds2-gemm-new-$r $NEW deepseek_v3 --ep 2 --rows routed
done
gemm ds2-fp8-gemm-new $NEW deepseek_v3 --ep 2 --rows routed --set precision=fp8_tensor
gemm ds2-fp8-gemm-old $OLD deepseek_v3 --ep 2 --rows routed --set precision=fp8_tensor
for r in 1 2; do
  step qw-new-$r $NEW qwen3_30b_a3b --set graph=true --steps 50
  step qw-old-$r $OLD qwen3_30b_a3b --set graph=true --steps 50
done
for r in 1 2; do
  step ds-old-$r $OLD deepseek_v3 --set gemm.method=grouped_sm90
  step ds-new-$r $NEW deepseek_v3 --set gemm.method=grouped_sm90
done
timeout 120 $NEW run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-qw.json > $L/check-qw.log 2>&1
echo "== check qw bf16 graph rc=$? at $(el) s: $(grep -E '^# check' $L/check-qw.log)" >> $S
timeout 150 $NEW run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set gemm.method=grouped_sm90 --set precision=fp8_block --set check=first --set check_unquantized=false --set roofline=false --steps 2 --warmup 2 --out $L/check-qw8.json > $L/check-qw8.log 2>&1
echo "== check qw fp8_block rc=$? at $(el) s: $(grep -E '^# check' $L/check-qw8.log)" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
