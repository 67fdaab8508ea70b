#!/usr/bin/env bash
# Session 39, call 6: permute and the combine's backward one block per token (a token's row, and
# dout's, read once for its K rows): every GPU test; both kernels under ncu in one Qwen3-30B-A3B
# and one DeepSeek-V3 step, new against old (devrun/rows.diff reversed, same call); the digests of
# both builds' steps compared (the kernels are to give the same bits); checks with drops.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
mkdir -p /tmp/old && tar cf - --exclude=./build-gpu . | (cd /tmp/old && tar xf -)
(cd /tmp/old && git apply -R devrun/rows.diff) && echo "old tree made" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cmake -S /tmp/old -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-old.log 2>&1 &&
  cmake --build /tmp/build-old -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure' $L/tests.log | head -20 >> $S
NCU=/usr/local/cuda/bin/ncu
for w in qwen3_30b_a3b deepseek_v3; do for v in new old; do
  b=build-gpu/moebench; [ $v = old ] && b=/tmp/build-old/moebench
  timeout 120 $NCU --clock-control none --profile-from-start off -k regex:"permute_rows|unpermute_combine_bwd" --metrics gpu__time_duration.sum $b run --backend cuda --config bench/$w --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-$w-$v.log 2>&1
  echo "== ncu $w $v rc=$? at $(el) s: $(grep -E '_kernel|gpu__time_duration' $L/ncu-$w-$v.log | sed -E 's/\(const.*//; s/ +/ /g' | tr '\n' ' ' | cut -c1-300)" >> $S
done; done
for v in new old; do
  b=build-gpu/moebench; [ $v = old ] && b=/tmp/build-old/moebench
  timeout 60 $b run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set capacity_factor=1.0 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$v.json > $L/dig-$v.log 2>&1
  echo "== digests run $v rc=$? at $(el) s" >> $S
done
python3 - "$L/dig-new.json" "$L/dig-old.json" >> $S 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
def find(d, key):
    if isinstance(d, dict):
        if key in d: return d[key]
        for v in d.values():
            r = find(v, key)
            if r is not None: return r
    return None
da, db = find(a, 'digests'), find(b, 'digests')
print('digests equal:', da == db, '| new:', json.dumps(da)[:300])
PY
timeout 120 build-gpu/moebench run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set capacity_factor=1.0 --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-cap.json > $L/check-cap.log 2>&1
echo "== check qw capacity 1.0 rc=$? at $(el) s: $(grep -E '^# check|^# capacity' $L/check-cap.log | tr '\n' ' ')" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
