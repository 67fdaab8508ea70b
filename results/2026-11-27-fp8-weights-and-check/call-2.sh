#!/usr/bin/env bash
# Session 22, call 2 (1 GPU): fp8_weights cached against per_step and bf16, same call: DeepSeek-V3
# at EP 1 (4096 tokens) and Mixtral-8x7B (8192 tokens), step and expert phases, the quantization's
# time alone; the GPU tests; then DeepSeek-V3 at EP 1 checked with graph true (digests against
# call 1's graph false) and the time of the check with the reference's host copies reused.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing']['phases']
q=d['timing'].get('fp8_weight_quantize_ms')
print('step', round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('experts_fwd','experts_bwd','shared_fwd','shared_bwd') if k in t), 'quantize_alone', q if q is None else round(q,3), 'method', d['gemm']['method'])" 2>&1 | tail -1; }
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 12 --warmup 3 --set align=16"
for round in 1 2; do
  for spec in "deepseek_v3 4096 grouped_sm90" "mixtral_8x7b 8192 lt_multistream"; do
    set -- $spec
    for v in bf16 per_step cached; do
      [ $(el) -gt 430 ] && continue
      P=""; [ $v != bf16 ] && P="--set precision=fp8_block --set fp8_weights=$v"
      [ $1 = mixtral_8x7b ] && [ $v != bf16 ] && P="--set precision=fp8_tensor --set fp8_weights=$v"
      n=$1-$v-r$round
      timeout 120 build-gpu/moebench run --config configs/bench/$1.json $COMMON --set tokens_per_rank=$2 --set gemm.method=$3 $P --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
    done
  done
done
if [ $(el) -lt 330 ]; then
  n=check-deepseek-ep1-graph-true
  /usr/bin/time -v timeout $(( 580 - $(el) )) build-gpu/moebench run --config configs/bench/deepseek_v3.json --backend cuda --set check=first --steps 1 --warmup 2 --set roofline=false --timeout-s 120 --set gemm.method=grouped_sm90 --set graph=true --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:|peak RSS|Maximum resident|^# correctness|host:' $L/$n.log | tr '\n' ' ')" >> $S
  python3 -c "
import json
a=json.load(open('devrun/call1-graph-false.json'));b=json.load(open('$L/$n.json'))
print('graph true vs call 1 graph false: equal', [k for k in a['digests'] if a['digests'][k]==b['digests'].get(k)], 'differ', [k for k in a['digests'] if a['digests'][k]!=b['digests'].get(k)])" >> $S 2>&1
fi
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
