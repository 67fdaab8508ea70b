#!/usr/bin/env bash
# Session 39, call 4: do 2-CTA clusters (B multicast: a third less L2 traffic a tile) make the
# grouped kernel's FP8 weight gradients beat cuBLASLt's on Mixtral-8x7B (71-76% of FP8 dense at
# 4096 tokens, call 3)? And gemm.algo tuned against auto for bf16 at 4096 tokens, alternating.
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
for t in 4096 8192; do for c in 1 2; do
  timeout 60 $B gemm --config bench/mixtral_8x7b --set tokens_per_rank=$t --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --set gemm.sm90_cluster=$c --methods lt_multistream,grouped_sm90 --iters 10 --out $L/gemm-$t-c$c.json > $L/gemm-$t-c$c.log 2>&1
  echo "== gemm $t cluster $c rc=$? at $(el) s: $(grep -E '^  (wgrad|dgrad_x|up)' $L/gemm-$t-c$c.log | grep fp8 | awk '{print $1, $2, $6}' | tr '\n' ' ')" >> $S
done; done
step() {  # tag [more]
  local n=$1; shift
  timeout 100 $B run --backend cuda --config bench/mixtral_8x7b --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=4 --set roofline=false --warmup 5 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/$n.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log) | $(grep -E '^# expert GEMMs' $L/$n.log | cut -c3-100)" >> $S
  grep -E 'error' $L/$n.log | head -3 >> $S
}
F8="--set precision=fp8_tensor --set fp8_weights=cached --set gemm.method=lt_multistream"
WG="--set gemm.sm90_cluster=2 --set gemm.method_wgrad_out=grouped_sm90 --set gemm.method_wgrad_in=grouped_sm90"
for r in 1 2; do
  step fp8-lt-$r $F8
  step fp8-wgc2-$r $F8 $WG
done
for r in 1 2; do
  step bf16-auto-$r --set gemm.method=lt_multistream
  step bf16-tuned-$r --set gemm.method=lt_multistream --set gemm.algo=tuned
done
step fp8-tuned $F8 --set gemm.algo=tuned
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
