#!/usr/bin/env bash
# Session 22, call 3 (2 GPUs): fp8_weights cached against per_step and bf16 at EP 2 on the three
# bench workloads (dispatch nvlink), two rounds; issue 16's figures at 2 GPUs.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing']['phases']
q=d['timing'].get('fp8_weight_quantize_ms')
print('step', round(d['timing']['step']['median'],3), ' '.join(k+' '+str(round(t[k]['median'],3)) for k in ('experts_fwd','experts_bwd','shared_fwd','shared_bwd') if k in t), 'quantize_alone', q if q is None else round(q,3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1))" 2>&1 | tail -1; }
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 60 --steps 12 --warmup 3 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
for round in 1 2; do
  for spec in "deepseek_v3 4096 grouped_sm90 fp8_block" "mixtral_8x7b 8192 lt_multistream fp8_tensor" "qwen3_30b_a3b 4096 grouped_sm90 fp8_block"; do
    set -- $spec
    for v in bf16 per_step cached; do
      [ $(el) -gt 520 ] && continue
      P=""; [ $v != bf16 ] && P="--set precision=$4 --set fp8_weights=$v"
      n=$1-$v-r$round
      timeout 100 $MPI build-gpu/moebench run --config configs/bench/$1.json $COMMON --set tokens_per_rank=$2 --set gemm.method=$3 $P --out $L/$n.json > $L/$n.log 2>&1
      echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
    done
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
