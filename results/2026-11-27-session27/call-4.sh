#!/usr/bin/env bash
# Session 27, call 4 (2 GPUs): main with expert_placement balanced as committed: a balanced dump
# on the GPU (tiny, EP 2) verified by the numpy verifier and compared with the contiguous one;
# a 64-expert DeepSeek-V3 checked with balanced placement; moebench dispatch on DeepSeek-V3's
# routing, contiguous against balanced.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
for pl in contiguous balanced; do
  $MPI build-gpu/moebench run --config configs/tiny.json --backend cuda --set mesh.ep=2 --set model.experts=16 \
    --set model.topk=4 --set tokens_per_rank=64 --set expert_placement=$pl --set dispatch=nvlink --steps 1 --warmup 0 \
    --dump $L/dump-$pl --out $L/tiny-$pl.json > $L/tiny-$pl.log 2>&1
  echo "tiny dump $pl rc=$? $(grep -E '^# check' $L/tiny-$pl.log) experts $(python3 -c "import json;print([json.load(open('$L/dump-$pl/rank%d/meta.json'%r))['experts'] for r in (0,1)])")" >> $S
done
python3 scripts/verify_dump.py $L/dump-balanced > $L/verify.txt 2>&1; echo "verify_dump balanced rc=$? $(tail -n 1 $L/verify.txt)" >> $S
python3 scripts/compare_dumps.py $L/dump-contiguous $L/dump-balanced > $L/compare.txt 2>&1; echo "compare_dumps rc=$? $(tail -n 1 $L/compare.txt)" >> $S
timeout 300 $MPI build-gpu/moebench run --config configs/bench/deepseek_v3.json --backend cuda --set mesh.ep=2 \
  --set model.experts=64 --set tokens_per_rank=2048 --set expert_grad_dtype=bf16 --set align=16 --set dispatch=nvlink \
  --set expert_placement=balanced --set check=first --steps 2 --warmup 2 --set warmup_s=0 --set roofline=false \
  --out $L/ds64-check.json > $L/ds64-check.log 2>&1
echo "deepseek 64 experts balanced check rc=$? at $(el) s" >> $S
grep -E '^# (routing|check)' $L/ds64-check.log >> $S
for pl in contiguous balanced; do
  timeout 200 $MPI build-gpu/moebench dispatch --config configs/bench/deepseek_v3.json --backend cuda --set mesh.ep=2 \
    --set align=16 --set expert_placement=$pl --dispatchers nvlink,alltoall --tokens 4096 --iters 20 --warmup 5 \
    --out $L/dispatch-$pl.json > $L/dispatch-$pl.log 2>&1
  echo "== dispatch $pl rc=$? at $(el) s" >> $S
  grep -E "^  (nvlink|alltoall) " $L/dispatch-$pl.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
