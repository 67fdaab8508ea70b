#!/usr/bin/env bash
# Session 38, call 3 (one H200): the final tree (HEAD + FP8 forward keeping xe's transposed codes,
# chunked steps keeping none): every GPU test; Mixtral-8x7B at 8192 tokens bf16 against fp8_tensor
# (issue 16's experts ratio, gemm.algo auto and tuned, in alternation), gemm.streams 2 and 8;
# Qwen3-30B-A3B's bf16 step with graphs at EP 1 (issue 15's figure).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
grep -E "error" $L/build.log | head -5 >> $S
timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED|Which is|Expected|Failure' $L/tests.log | head -20 >> $S
grep -E 'strides [0-9]+, [0-9]+: largest' $L/tests.log >> $S
B=build-gpu/moebench
step() {  # tag [more]
  local n=$1; shift
  timeout 90 $B run --backend cuda --config bench/mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set fp8_weights=cached --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=5 --set roofline=false --steps 20 --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log) $(grep -oE 'power [0-9]+ W' $L/$n.log)" >> $S
  grep -E 'error' $L/$n.log | head -3 >> $S
}
for r in 1 2; do
  step bf16-auto-$r --set precision=bf16 --set gemm.algo=auto
  step fp8-auto-$r --set precision=fp8_tensor --set gemm.algo=auto
  step bf16-tuned-$r --set precision=bf16 --set gemm.algo=tuned
  step fp8-tuned-$r --set precision=fp8_tensor --set gemm.algo=tuned
done
step fp8-streams2 --set precision=fp8_tensor --set gemm.streams=2
step fp8-streams8 --set precision=fp8_tensor --set gemm.streams=8
step bf16-streams8 --set precision=bf16 --set gemm.streams=8
for r in 1 2; do
  timeout 90 $B run --backend cuda --config bench/qwen3_30b_a3b --set graph=true --set check=off --set warmup_s=5 --set roofline=false --steps 50 --warmup 5 --out $L/qw-graph-$r.json > $L/qw-graph-$r.log 2>&1
  echo "== qw-graph-$r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-graph-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-graph-$r.log) $(grep -E '^# expert GEMMs' $L/qw-graph-$r.log | cut -c1-60)" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
