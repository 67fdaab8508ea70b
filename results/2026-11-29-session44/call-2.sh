#!/usr/bin/env bash
# Session 44 call 2 (one H200): the fused SwiGLU epilogues (gemm.sm90_fuse_swiglu) staged by
# stmatrix like the plain ones since e3aa255 (the working tree this call
# carries). Their SASS shrank by 150-190 instructions, the default path's kernels unchanged.
# Correct: the GPU tests (fused against unfused, bitwise), digests fused = unfused on three
# workloads. Faster? Steps fused against unfused alternating (the fusion lost 2-2.4% before,
# its epilogue not overlapping the MMAs).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
find app core kernels comm dispatch tests -type f \( -name "*.cu" -o -name "*.cpp" -o -name "*.h" -o -name "*.cuh" \) -exec touch {} +
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j$(nproc) --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
MB=build-gpu/moebench
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head -10 >> $S
for c in qw ds mx; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mx) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024 --set precision=fp8_tensor";;
  esac
  for f in false true; do
    timeout 90 $MB run --backend cuda $args --set gemm.method=grouped_sm90 --set gemm.sm90_fuse_swiglu=$f --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$f.json > $L/dig-$c-$f.log 2>&1
  done
  python3 -c "import json,sys; d=[json.load(open(f)).get('digests') for f in sys.argv[1:]]; print('$c digests unfused = fused:', d[0]==d[1], '; empty:', not d[0])" $L/dig-$c-false.json $L/dig-$c-true.json >> $S 2>&1
done
timeout 120 $MB run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set gemm.sm90_fuse_swiglu=true --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-fused.log 2>&1
echo "check qwen3 graph fused rc=$? at $(el) s: $(grep -E '^# check' $L/check-fused.log)" >> $S
for r in 1 2; do for w in qw ds mx; do for f in false true; do
  [ $(el) -gt 540 ] && break 3
  case $w in
    qw) a="--config bench/qwen3_30b_a3b --set graph=true --steps 50 --set warmup_s=3";;
    ds) a="--config bench/deepseek_v3 --set graph=true --steps 20 --set warmup_s=4";;
    mx) a="--config bench/mixtral_8x7b --set tokens_per_rank=8192 --steps 20 --set warmup_s=4";;
  esac
  timeout 60 $MB run --backend cuda $a --set gemm.method=grouped_sm90 --set gemm.sm90_fuse_swiglu=$f --set expert_grad_dtype=bf16 --set align=16 --set check=off --set roofline=false --warmup 5 --out $L/$w-$f-$r.json > $L/$w-$f-$r.log 2>&1
  echo "== $w fused=$f round $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$w-$f-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$w-$f-$r.log | head -1)" >> $S
done; done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
