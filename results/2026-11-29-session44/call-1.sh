#!/usr/bin/env bash
# Prepared in session 43 (not run: the device budget was spent). The grouped kernel's bf16
# epilogue by stmatrix (stmatrix-epilogue.diff): each warp stages its fragment's bf16 pairs four
# 8 x 8 matrices an instruction instead of one 4-byte store a pair with its own swizzled address.
# Compiled here: every one of the 82 grouped kernels keeps main's registers and spills (ptxas -v),
# and 31 of them (the bf16-output ones) lose 72-248 SASS instructions (section sizes / 16, e.g.
# 2144 -> 1904). Why: session 42's ncu found Qwen3-30B-A3B's weight gradients' tensor pipes half
# idle while the epilogue runs (about 1430 instructions a warp a tile). Build A (main) and B
# (main + diff) side by side; B's GPU tests; digests A = B (the same bf16 values, staged
# differently); `moebench gemm` A/B alternating; Qwen3-30B-A3B's graph step A/B alternating. Land
# the diff if the tests and digests hold and B is faster. Copy to devrun/ and run from the
# repository root with BUILD_COMMIT ("<full 40-digit commit> 1") carried; one H200 (x2: the same).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
J=$(( $(nproc) / 2 ))
rm -rf /tmp/srcB && mkdir -p /tmp/srcB && cp -a . /tmp/srcB && rm -rf /tmp/srcB/build-gpu
(cd /tmp/srcB && git apply results/2026-11-29-session43/stmatrix-epilogue.diff; echo "apply stmatrix rc=$?") >> $S
find app core kernels comm dispatch tests -type f \( -name "*.cu" -o -name "*.cpp" -o -name "*.h" -o -name "*.cuh" \) -exec touch {} +
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j$J --target moebench > $L/build.log 2>&1
  echo "build A rc=$? at $(el) s" >> $S ) &
( cd /tmp/srcB && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-b.log 2>&1 &&
  cmake --build build-gpu -j$J --target moebench moe_cuda_tests > $L/build-b.log 2>&1
  echo "build B rc=$? at $(el) s" >> $S ) &
wait
cp build-gpu/moebench /tmp/mb-A; cp /tmp/srcB/build-gpu/moebench /tmp/mb-B
timeout 200 /tmp/srcB/build-gpu/tests/moe_cuda_tests > $L/tests-B.log 2>&1
echo "GPU tests B rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-B.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests-B.log | head -10 >> $S
for c in qw ds mx; do
  case $c in
    qw) args="--config bench/qwen3_30b_a3b";;
    ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
    mx) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024 --set precision=fp8_tensor";;
  esac
  for b in A B; do
    timeout 90 /tmp/mb-$b run --backend cuda $args --set gemm.method=grouped_sm90 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$b.json > $L/dig-$c-$b.log 2>&1
  done
  python3 -c "import json,sys; d=[json.load(open(f)).get('digests') for f in sys.argv[1:]]; print('$c digests A = B:', d[0]==d[1], '; empty:', not d[0])" $L/dig-$c-A.json $L/dig-$c-B.json >> $S 2>&1
done
timeout 120 /tmp/mb-B run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph-B.log 2>&1
echo "check qwen3 graph B rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph-B.log)" >> $S
for r in 1 2; do for b in A B; do for w in qw ds mx; do
  [ $(el) -gt 400 ] && break 3
  case $w in
    qw) a="--config bench/qwen3_30b_a3b";;
    ds) a="--config bench/deepseek_v3 --ep 2";;
    mx) a="--config bench/mixtral_8x7b --set tokens_per_rank=8192";;
  esac
  timeout 60 /tmp/mb-$b gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 50 --out $L/gemm-$w-$b-$r.json > $L/gemm-$w-$b-$r.log 2>&1
  echo "== gemm $w $b round $r rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-$w-$b-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -E '^# totals' $L/gemm-$w-$b-$r.log | cut -c1-60) $(grep -oE 'SM [0-9]+ MHz' $L/gemm-$w-$b-$r.log)" >> $S
done; done; done
for w in qw ds mx; do for r in 1 2; do
  [ -f $L/gemm-$w-A-$r.json ] && [ -f $L/gemm-$w-B-$r.json ] || continue
  /tmp/mb-A compare $L/gemm-$w-A-$r.json $L/gemm-$w-B-$r.json > $L/compare-$w-$r.txt 2>&1
  echo "compare $w round $r (B/A): $(grep -E '^  totals bf16 grouped_sm90' $L/compare-$w-$r.txt)" >> $S
done; done
# Ping-pong (each MMA warpgroup its own 128 x 128 tile, so that one's epilogue runs beside the
# other's MMAs) on today's kernel: 15% slower on Qwen3-30B-A3B's wgrad_in in session 7
# (results/2026-11-24-grouped-gemm), before 35 sessions of changes to the kernel; if the weight
# gradients now gain, a schedule per layout is a small host change.
for r in 1 2; do for b in A B; do for w in qw ds; do
  [ $(el) -gt 470 ] && break 3
  case $w in qw) a="--config bench/qwen3_30b_a3b";; ds) a="--config bench/deepseek_v3 --ep 2";; esac
  timeout 60 /tmp/mb-$b gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --set gemm.sm90_schedule=pingpong --methods grouped_sm90 --iters 50 > $L/gemm-pp-$w-$b-$r.log 2>&1
  echo "== gemm pingpong $w $b round $r rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-pp-$w-$b-$r.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-pp-$w-$b-$r.log)" >> $S
done; done; done
for r in 1 2 3; do for b in A B; do
  [ $(el) -gt 550 ] && break 2
  timeout 40 /tmp/mb-$b run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=3 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$b-$r.log 2>&1
  echo "== qw graph $b round $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$b-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-$b-$r.log)" >> $S
done; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
