#!/usr/bin/env bash
# Session 40, call 5 (one H200, the budget's last 244 s): the quantization kernel without the
# block-wide tiny-value vote where one scale serves a tile both ways (each thread quantizes only
# what it loaded; its warp votes): the FP8 GPU tests, then ncu on one Mixtral-8x7B fp8_tensor
# step's quantize_tiles launches, new against the tree without it (fp8_quantize.cu reverted and
# rebuilt in the same call).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
timeout 60 build-gpu/tests/moe_cuda_tests --gtest_filter='*Fp8*' > $L/tests.log 2>&1
echo "FP8 GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
NCU=/usr/local/cuda/bin/ncu
Q() { timeout 60 $NCU --clock-control none --profile-from-start off -k regex:quantize_tiles --metrics gpu__time_duration.sum $1 run --backend cuda --config bench/mixtral_8x7b --set precision=fp8_tensor --set fp8_weights=cached --set gemm.method=lt_multistream --set expert_grad_dtype=bf16 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-$2.log 2>&1
  echo "== ncu quant $2 rc=$? at $(el) s: $(grep -E 'gpu__time_duration' $L/ncu-$2.log | awk '{print $NF}' | tr '\n' ' ')" >> $S; }
Q /tmp/mb-new new
git checkout kernels/cuda/fp8_quantize.cu && echo "reverted" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
Q build-gpu/moebench old
Q /tmp/mb-new new2
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
