#!/usr/bin/env bash
# Prepared in session 42 (one H200; not run). Part 2 of next-call-dynamic-schedule.sh: the
# dynamic schedule with session 41's grouped-dead-half.diff on top (a warpgroup whose 64 rows all
# lie past its group's skips its MMAs: call 3 found its slowdown to be the static schedule's
# drift), against the dynamic schedule alone (/tmp/mb-dyn from part 1, rebuilt if the machine is
# fresh), both schedules each: `moebench gemm --rows routed` on DeepSeek-V3's EP 2 rows and
# Qwen3-30B-A3B's, then the best variants' steps (Qwen3-30B-A3B with a graph, DeepSeek-V3 at EP 1),
# alternating. Copy to devrun/ and run from the repository root with BUILD_COMMIT carried.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
git apply results/2026-11-29-session42/dynamic-schedule.diff; echo "apply dynamic rc=$?" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1
touch kernels/cuda/grouped_gemm.cu
if [ ! -x /tmp/mb-dyn ]; then
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-dyn.log 2>&1
  echo "build dynamic rc=$? at $(el) s" >> $S
  cp build-gpu/moebench /tmp/mb-dyn
fi
git apply results/2026-11-29-session41/grouped-dead-half.diff; echo "apply dead-half rc=$?" >> $S
touch kernels/cuda/grouped_gemm.cu
cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build-dh.log 2>&1
echo "build dynamic + dead half rc=$? at $(el) s" >> $S
cp build-gpu/moebench /tmp/mb-dh
for c in qw ds; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
  esac
  for b in dh dyn; do
    MOE_EXP_DYNAMIC=1 timeout 90 /tmp/mb-$b run --backend cuda $args --set gemm.method=grouped_sm90 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$b.json > $L/dig-$c-$b.log 2>&1
  done
  python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); print('$c digests dead half = without:', a.get('digests')==b.get('digests'))" $L/dig-$c-dh.json $L/dig-$c-dyn.json >> $S 2>&1
done
for r in 1 2; do for v in dh:1 dh:0 dyn:1 dyn:0; do for w in ds qw; do
  [ $(el) -gt 380 ] && break 3
  b=${v%%:*}; d=${v##*:}
  case $w in qw) a="--config bench/qwen3_30b_a3b";; ds) a="--config bench/deepseek_v3 --ep 2";; esac
  MOE_EXP_DYNAMIC=$d timeout 60 /tmp/mb-$b gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 > $L/gemm-$w-$b-$d-$r.log 2>&1
  echo "== gemm $w $b dynamic $d round $r rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-$w-$b-$d-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-$w-$b-$d-$r.log)" >> $S
done; done; done
# Steps: main's schedule (dyn binary, switch off) against the dynamic one with and without the
# dead half; pick the variants by the GEMM figures above before spending the time.
for r in 1 2; do for v in dyn:0 dyn:1 dh:1; do
  [ $(el) -gt 560 ] && break 2
  b=${v%%:*}; d=${v##*:}
  MOE_EXP_DYNAMIC=$d timeout 40 /tmp/mb-$b run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=3 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$b-$d-$r.log 2>&1
  echo "== qw graph $b dynamic $d round $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$b-$d-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-$b-$d-$r.log)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
