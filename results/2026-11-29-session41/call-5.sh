#!/usr/bin/env bash
# Session 41, call 5 (one H200): grouped-dead-half.diff, a warpgroup whose 64 rows of a row
# GEMM's tile all lie past the group's rows (a group's last tile with at most 64 rows, a cluster's
# spare tile) skips its MMAs and only passes the stages back. Every GPU test; digests against the
# tree without it (built in the same call); `moebench gemm --rows routed` on DeepSeek-V3's EP 2
# shapes and Qwen3-30B-A3B's, and Qwen3-30B-A3B's graph step, new and old alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session41
git apply $R/grouped-dead-half.diff; echo "apply rc=$?" >> $S
echo "applied: $(git diff --stat | tail -1)" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build new rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-new
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Failure' $L/tests.log | head -20 >> $S
git apply -R $R/grouped-dead-half.diff; echo "reverse rc=$?" >> $S
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-old.log 2>&1
echo "build old rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-old
for c in qw qwpos qwcl ds mx; do for v in new old; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    qwpos) args="--config bench/qwen3_30b_a3b --set capacity_factor=1.0 --set drop_policy=position";;
    qwcl) args="--config bench/qwen3_30b_a3b --set gemm.sm90_cluster=2 --set gemm.sm90_fuse_swiglu=true";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mx) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024";;
  esac
  timeout 90 /tmp/mb-$v run --backend cuda $args --set gemm.method=grouped_sm90 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$v.json > $L/dig-$c-$v.log 2>&1
  echo "== digests $c $v rc=$? at $(el) s" >> $S
done
python3 - "$L/dig-$c-new.json" "$L/dig-$c-old.json" >> $S 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print('digests equal:', a.get('digests') == b.get('digests'), '|', json.dumps(a.get('digests'))[:120])
PY
done
timeout 120 /tmp/mb-new run --backend cuda --config bench/qwen3_30b_a3b --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph.log 2>&1
echo "== check graph rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph.log)" >> $S
for r in 1 2; do for v in new old; do
  timeout 90 /tmp/mb-$v gemm --config configs/bench/deepseek_v3.json --ep 2 --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $L/gemm-ds-$v-$r.log 2>&1
  echo "== gemm ds ep2 routed $v $r rc=$? at $(el) s" >> $S
  timeout 90 /tmp/mb-$v gemm --config configs/bench/qwen3_30b_a3b.json --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $L/gemm-qw-$v-$r.log 2>&1
  echo "== gemm qw routed $v $r rc=$? at $(el) s" >> $S
done; done
for r in 1 2; do for v in old new; do
  timeout 100 /tmp/mb-$v run --backend cuda --config bench/qwen3_30b_a3b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$v-$r.log 2>&1
  echo "== qw graph $v $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$v-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-$v-$r.log)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
