#!/usr/bin/env bash
# Session 42, call 4 (one H200): the bf16 weight gradients' epilogue with three staging boxes a
# warpgroup (wgrad-three-boxes.diff): the tile's four boxes in rounds of 3 and 1, the second
# round waiting only for the first box's store to have read its slot (two boxes: rounds of 2 and
# 2, the second waiting for both), still 7 stages. Call 3's ncu: Qwen3-30B-A3B's wgrad_in with
# the tensor pipes 52% busy and DRAM 47%, i.e. MMAs and epilogue in turn. Every GPU test with it,
# digests equal, `moebench gemm --rows routed` old/new alternating on Qwen3-30B-A3B and
# DeepSeek-V3 EP 2, and Qwen3-30B-A3B's graph step.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session42
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-old
git apply $R/wgrad-three-boxes.diff; echo "apply rc=$?" >> $S
touch kernels/cuda/grouped_gemm.cu kernels/cuda/sm90.cuh
cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build-new.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure|Expected|Which is' $L/tests.log | head -20 >> $S
for v in new old; do
  timeout 60 /tmp/mb-$v run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-qw-$v.json > $L/dig-qw-$v.log 2>&1
  echo "== digests qw $v rc=$? at $(el) s" >> $S
done
python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); print('digests equal:', a.get('digests')==b.get('digests'))" $L/dig-qw-new.json $L/dig-qw-old.json >> $S 2>&1
for r in 1 2; do for v in new old; do
  for w in qw ds; do
    [ $(el) -gt 520 ] && break 3
    case $w in qw) a="--config bench/qwen3_30b_a3b";; ds) a="--config bench/deepseek_v3 --ep 2";; esac
    timeout 90 /tmp/mb-$v gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $L/gemm-$w-$v-$r.log 2>&1
    echo "== gemm $w $v $r rc=$? at $(el) s: $(grep -E '^  (wgrad_out|wgrad_in|up) ' $L/gemm-$w-$v-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-$w-$v-$r.log)" >> $S
  done
done; done
for r in 1 2; do for v in new old; do
  [ $(el) -gt 560 ] && break 2
  timeout 40 /tmp/mb-$v run --backend cuda --config bench/qwen3_30b_a3b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=3 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$v-$r.log 2>&1
  echo "== qw graph $v $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$v-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-$v-$r.log)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
