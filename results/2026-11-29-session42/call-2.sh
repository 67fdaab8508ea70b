#!/usr/bin/env bash
# Call 2 (one H200, the machine of call 1): session 41's rank spread (rank-spread.diff) on the GPU
# path: built over main (the changed files touched, so that no stale object survives), digests of
# 4 workloads new vs old (main's, built in call 1b), the JSON's rank_spread on every phase, a
# graph check, and the Qwen3-30B-A3B graph step new and old alternating (the per-step all-reduce
# now carries the negated times too).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session41
[ -x /tmp/mb-old ] || { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1; touch app/*.cpp kernels/cuda/*.cu; cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1; cp build-gpu/moebench /tmp/mb-old; echo "rebuilt old at $(el) s" >> $S; }
git apply $R/rank-spread.diff; echo "apply rc=$?" >> $S
touch app/*.cpp app/*.h kernels/cuda/fp8_quantize.cu
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-new.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
for c in qw qwpos ds mxfp8; do for v in new old; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    qwpos) args="--config bench/qwen3_30b_a3b --set capacity_factor=1.0 --set drop_policy=position";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mxfp8) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024 --set precision=fp8_tensor";;
  esac
  timeout 90 /tmp/mb-$v run --backend cuda $args --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$v.json > $L/dig-$c-$v.log 2>&1
  echo "== digests $c $v rc=$? at $(el) s" >> $S
done
python3 - "$L/dig-$c-new.json" "$L/dig-$c-old.json" >> $S 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ph = a['timing']['phases']
print('digests equal:', a.get('digests') == b.get('digests'), '| rank_spread on every phase:',
      all('rank_spread' in v for v in ph.values()), '| largest spread median:',
      max(v['rank_spread']['median'] for v in ph.values()), '| old has none:',
      all('rank_spread' not in v for v in b['timing']['phases'].values()))
PY
done
grep -c '^# ranks' $L/dig-qw-new.log | sed 's/^/ranks lines at one rank: /' >> $S
timeout 120 /tmp/mb-new run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph.log 2>&1
echo "== check graph rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph.log)" >> $S
for r in 1 2; do for v in new old; do
  timeout 100 /tmp/mb-$v run --backend cuda --config bench/qwen3_30b_a3b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$v-$r.log 2>&1
  echo "== qw graph $v $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$v-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -E '^# host' $L/qw-$v-$r.log)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
