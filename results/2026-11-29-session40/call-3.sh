#!/usr/bin/env bash
# Session 40, call 3 (one H200): the layout in one block (no scratch), the one-rank counts
# exchange as a copy and the router statistics a warp per chunk, against the tree without them
# (the same diff reversed, rebuilt in the same call).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
git diff HEAD -- kernels/cuda/layout.cu comm/nccl_comm.cpp kernels/cuda/router.cu > /tmp/lay.diff
echo "layout diff $(wc -l < /tmp/lay.diff) lines" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure' $L/tests.log | head -20 >> $S
git apply -R /tmp/lay.diff && echo "layout diff reversed" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-old
git apply /tmp/lay.diff
NCU=/usr/local/cuda/bin/ncu
for w in qwen3_30b_a3b deepseek_v3; do for v in new old; do
  timeout 120 $NCU --clock-control none --profile-from-start off -k regex:"layout|expert_major|expert_blocks|ncclDev|router_stats" --metrics gpu__time_duration.sum /tmp/mb-$v run --backend cuda --config bench/$w --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --set warmup_s=0 --steps 1 --warmup 1 --profile > $L/ncu-$w-$v.log 2>&1
  echo "== ncu $w $v rc=$? at $(el) s: $(grep -E '^  [a-zA-Z].*\(|gpu__time_duration' $L/ncu-$w-$v.log | sed -E 's/\(const.*//; s/\(ncclDev.*//; s/moe::<unnamed>:://; s/ +/ /g; s/gpu__time_duration.sum us//' | tr '\n' ' ' | cut -c1-400)" >> $S
done; done
for c in dropless position auxz dsauxz; do for v in new old; do
  extra=""; [ $c = position ] && extra="--set capacity_factor=1.0 --set drop_policy=position"
  [ $c = auxz ] && extra="--set router.aux_coeff=0.01 --set router.z_coeff=0.001"
  cfg=bench/qwen3_30b_a3b
  [ $c = dsauxz ] && { extra="--set router.aux_coeff=0.01 --set router.z_coeff=0.001 --set tokens_per_rank=1024"; cfg=bench/deepseek_v3; }
  timeout 60 /tmp/mb-$v run --backend cuda --config $cfg --set align=16 $extra --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$v.json > $L/dig-$c-$v.log 2>&1
  echo "== digests $c $v rc=$? at $(el) s" >> $S
done
python3 - "$L/dig-$c-new.json" "$L/dig-$c-old.json" >> $S 2>&1 <<'PY'
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
done
timeout 120 /tmp/mb-new run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-graph.json > $L/check-graph.log 2>&1
echo "== check graph rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph.log)" >> $S
timeout 120 /tmp/mb-new run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set router.aux_coeff=0.01 --set router.z_coeff=0.001 --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-auxz.json > $L/check-auxz.log 2>&1
echo "== check aux z rc=$? at $(el) s: $(grep -E '^# check' $L/check-auxz.log)" >> $S
timeout 120 /tmp/mb-new run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set capacity_factor=1.0 --set drop_policy=position --set check=first --set roofline=false --steps 2 --warmup 2 --out $L/check-pos.json > $L/check-pos.log 2>&1
echo "== check position rc=$? at $(el) s: $(grep -E '^# check|^# capacity' $L/check-pos.log | tr '\n' ' ')" >> $S
for r in 1 2; do for v in new old; do
  timeout 100 /tmp/mb-$v run --backend cuda --config bench/qwen3_30b_a3b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set graph=true --steps 50 --warmup 5 --out $L/qw-$v-$r.json > $L/qw-$v-$r.log 2>&1
  echo "== qw graph $v $r rc=$? at $(el) s: $(grep -E '^  (step|layout|router_fwd) |^   counts_exchange' $L/qw-$v-$r.log | awk '{print $1, $2}' | tr '\n' ' ')" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
