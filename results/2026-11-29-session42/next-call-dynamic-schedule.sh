#!/usr/bin/env bash
# Prepared in session 42 (one H200; not run: the device budget was spent). The grouped kernel's
# dynamic tile schedule (dynamic-schedule.diff): the producer takes each next unit from a
# per-launch counter and hands it to its consumers through a shared-memory ring, so that the CTA
# free first takes the next unit and the units running at a time stay neighbours in the schedule
# (single CTAs, cooperative; clusters and ping-pong keep the static schedule). A throwaway switch,
# MOE_EXP_DYNAMIC=1 (never to land), turns it on, so that one build runs both. Why: session 42's
# call 3 found the static schedule's drift (a tile that finishes early runs its CTA ahead of the
# neighbours streaming the same weights) behind the dead-half slowdown, and the weight gradients'
# units differ with each expert's rows. Part 1: every GPU test both ways, digests static against
# dynamic (must be equal: each tile is computed alike whichever CTA takes it), a graph check
# dynamic, and `moebench gemm --rows routed` both ways. Part 2 (with session 41's
# grouped-dead-half.diff on top): the same GEMMs, both schedules, and the steps. Land the schedule
# (switch removed; a workload key only if it loses somewhere) if the tests and digests hold and it
# is faster; the dead half with it if that is faster still.
# Copy to devrun/ and run from the repository root with BUILD_COMMIT ("<full 40-digit commit> 1").
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session42
git apply $R/dynamic-schedule.diff; echo "apply rc=$?" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-dyn
for d in 1 0; do
  MOE_EXP_DYNAMIC=$d timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests-dyn$d.log 2>&1
  echo "GPU tests MOE_EXP_DYNAMIC=$d rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-dyn$d.log | tr '\n' ' ')" >> $S
  grep -E '^\[  FAILED|Failure|Expected|Which is' $L/tests-dyn$d.log | head -10 >> $S
  [ $d = 1 ] && [ $(el) -gt 300 ] && break
done
for c in qw ds mxfp8; do for d in 1 0; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mxfp8) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024 --set precision=fp8_tensor";;
  esac
  MOE_EXP_DYNAMIC=$d timeout 90 /tmp/mb-dyn run --backend cuda $args --set gemm.method=grouped_sm90 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$d.json > $L/dig-$c-$d.log 2>&1
  echo "== digests $c dynamic $d rc=$? at $(el) s" >> $S
done
python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); print('digests equal:', a.get('digests')==b.get('digests'))" $L/dig-$c-1.json $L/dig-$c-0.json >> $S 2>&1
done
MOE_EXP_DYNAMIC=1 timeout 120 /tmp/mb-dyn run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph.log 2>&1
echo "== check graph dynamic rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph.log)" >> $S
for r in 1 2; do for d in 1 0; do for w in qw ds; do
  [ $(el) -gt 540 ] && break 3
  case $w in qw) a="--config bench/qwen3_30b_a3b";; ds) a="--config bench/deepseek_v3 --ep 2";; esac
  MOE_EXP_DYNAMIC=$d timeout 60 /tmp/mb-dyn gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $L/gemm-$w-$d-$r.log 2>&1
  echo "== gemm $w dynamic $d round $r rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-$w-$d-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-$w-$d-$r.log)" >> $S
done; done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
# Part 2: next-call-dynamic-schedule-2.sh (the same machine if it is still warm).
