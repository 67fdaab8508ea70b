#!/usr/bin/env bash
# Session 39, call 5: f32_to_storage in 16-byte moves (the step's last pass over dx): every GPU
# test; the kernel under ncu in one Qwen3-30B-A3B and one DeepSeek-V3 step, new against old
# (devrun/f32.diff reversed, built in the same call); Qwen3-30B-A3B's check with graphs.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
mkdir -p /tmp/old && tar cf - --exclude=./build-gpu . | (cd /tmp/old && tar xf -)
(cd /tmp/old && git apply -R devrun/f32.diff) && echo "old tree made" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cmake -S /tmp/old -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-old.log 2>&1 &&
  cmake --build /tmp/build-old -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
timeout 400 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure' $L/tests.log | head -20 >> $S
NCU=/usr/local/cuda/bin/ncu
for w in qwen3_30b_a3b deepseek_v3; do for v in new old; do
  b=build-gpu/moebench; [ $v = old ] && b=/tmp/build-old/moebench
  timeout 150 $NCU --clock-control none --profile-from-start off -k regex:f32_to_storage --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum $b run --backend cuda --config bench/$w --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-$w-$v.log 2>&1
  echo "== ncu $w $v rc=$? at $(el) s: $(grep -E 'f32_to_storage|gpu__time_duration|dram__bytes' $L/ncu-$w-$v.log | awk '{$1=$1; print}' | tr '\n' ' ' | cut -c1-400)" >> $S
done; done
timeout 120 build-gpu/moebench run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-qw.json > $L/check-qw.log 2>&1
echo "== check qw graph rc=$? at $(el) s: $(grep -E '^# check' $L/check-qw.log)" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
