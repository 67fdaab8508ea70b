#!/usr/bin/env bash
# Session 39, call 3: issue 16's Mixtral-8x7B ratio at the bench workload's own 4096 tokens and at
# 8192, gemm.method auto (the bench default), bf16 and fp8_tensor alternating; gemm.algo tuned once
# (kGemmTuneCandidates moved to core); moebench gemm bf16 and fp8_tensor per GEMM.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
step() {  # tag [more]
  local n=$1; shift
  timeout 100 $B run --backend cuda --config bench/mixtral_8x7b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log) | $(grep -E '^# expert GEMMs' $L/$n.log | cut -c3-120)" >> $S
  grep -E 'error|tuned' $L/$n.log | head -3 >> $S
}
F8="--set precision=fp8_tensor --set fp8_weights=cached"
for t in 4096 8192; do
  for r in 1 2; do
    step bf16-$t-$r --set tokens_per_rank=$t
    step fp8t-$t-$r --set tokens_per_rank=$t $F8
  done
done
step fp8b-4096 --set tokens_per_rank=4096 --set precision=fp8_block --set fp8_weights=cached
step bf16-4096-tuned --set tokens_per_rank=4096 --set gemm.method=lt_multistream --set gemm.algo=tuned
for p in bf16 fp8_tensor; do
  timeout 60 $B gemm --config bench/mixtral_8x7b --set align=16 --set expert_grad_dtype=bf16 --set precision=$p --methods lt_multistream,grouped_sm90 --iters 10 --out $L/gemm-$p.json > $L/gemm-$p.log 2>&1
  echo "== gemm $p rc=$? at $(el) s" >> $S; grep -E "^  " $L/gemm-$p.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
