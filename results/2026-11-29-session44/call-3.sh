#!/usr/bin/env bash
# Session 44 call 3 (one H200): the bf16 weight gradients' epilogue deferred into the next
# tile's first K stages (the working tree this call carries): the tile packed to bf16 pairs,
# which frees the accumulators, each round of the staging boxes filled and stored after the next
# tile issues K stage `round`, so that the fills and the wait for the first round's reads run
# beside MMAs. A = main 34eb8c7 (devrun/base_grouped_gemm.cu), B = the working tree, built side
# by side. B's GPU tests; digests A = B with bf16 gradients; gemm A/B alternating (totals by
# moebench compare); Qwen3-30B-A3B graph steps and DeepSeek-V3 EP 1 graph steps A/B alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
J=$(( $(nproc) / 2 ))
find app core kernels comm dispatch tests -type f \( -name "*.cu" -o -name "*.cpp" -o -name "*.h" -o -name "*.cuh" \) -exec touch {} +
rm -rf /tmp/srcA && mkdir -p /tmp/srcA && cp -a . /tmp/srcA && rm -rf /tmp/srcA/build-gpu
cp devrun/base_grouped_gemm.cu /tmp/srcA/kernels/cuda/grouped_gemm.cu && touch /tmp/srcA/kernels/cuda/grouped_gemm.cu
( cd /tmp/srcA && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-a.log 2>&1 &&
  cmake --build build-gpu -j$J --target moebench > $L/build-a.log 2>&1
  echo "build A rc=$? at $(el) s" >> $S ) &
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j$J --target moebench moe_cuda_tests > $L/build.log 2>&1
  echo "build B rc=$? at $(el) s" >> $S ) &
wait
cp /tmp/srcA/build-gpu/moebench /tmp/mb-A; cp build-gpu/moebench /tmp/mb-B
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests-B.log 2>&1
echo "GPU tests B rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-B.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests-B.log | head -10 >> $S
for c in qw ds mx ds2; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mx) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024";;
    ds2) args="--config bench/deepseek_v3 --set tokens_per_rank=512 --set align=1";;
  esac
  for b in A B; do
    timeout 90 /tmp/mb-$b run --backend cuda $args --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$b.json > $L/dig-$c-$b.log 2>&1
  done
  python3 -c "import json,sys; d=[json.load(open(f)).get('digests') for f in sys.argv[1:]]; print('$c digests A = B:', d[0]==d[1], '; empty:', not d[0])" $L/dig-$c-A.json $L/dig-$c-B.json >> $S 2>&1
done
timeout 120 /tmp/mb-B run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph-B.log 2>&1
echo "check qwen3 graph B rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph-B.log)" >> $S
for r in 1 2; do for b in A B; do for w in qw ds mx; do
  [ $(el) -gt 380 ] && break 3
  case $w in
    qw) a="--config bench/qwen3_30b_a3b";;
    ds) a="--config bench/deepseek_v3 --ep 2";;
    mx) a="--config bench/mixtral_8x7b --set tokens_per_rank=8192";;
  esac
  timeout 60 /tmp/mb-$b gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 50 --out $L/gemm-$w-$b-$r.json > $L/gemm-$w-$b-$r.log 2>&1
  echo "== gemm $w $b round $r rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-$w-$b-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-$w-$b-$r.log)" >> $S
done; done; done
for w in qw ds mx; do for r in 1 2; do
  [ -f $L/gemm-$w-A-$r.json ] && [ -f $L/gemm-$w-B-$r.json ] || continue
  /tmp/mb-A compare $L/gemm-$w-A-$r.json $L/gemm-$w-B-$r.json > $L/compare-$w-$r.txt 2>&1
  echo "compare $w round $r (B/A): $(grep -E '^  totals bf16 grouped_sm90' $L/compare-$w-$r.txt)" >> $S
done; done
for r in 1 2 3; do for b in A B; do
  [ $(el) -gt 470 ] && break 2
  timeout 40 /tmp/mb-$b run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=3 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$b-$r.log 2>&1
  echo "== qw graph $b round $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$b-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-$b-$r.log | head -1)" >> $S
done; done
for r in 1 2; do for b in A B; do
  [ $(el) -gt 545 ] && break 2
  timeout 40 /tmp/mb-$b run --backend cuda --config bench/deepseek_v3 --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --set graph=true --steps 20 --warmup 5 > $L/ds-$b-$r.log 2>&1
  echo "== ds graph $b round $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/ds-$b-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/ds-$b-$r.log | head -1)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
