#!/usr/bin/env bash
# Session 28, call 7 (one GPU): the energy counter (NVML) in the sampler and the report: its GPU
# test, and one step's joules on Qwen3-30B-A3B and on Mixtral-8x7B bf16 against fp8_tensor.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
timeout 60 build-gpu/tests/moe_cuda_tests --gtest_filter='NvmlClocks*:Deterministic*:*Grouped*' > $L/tests.log 2>&1
echo "GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
go() {  # name config [more]
  local n=$1 cfg=$2; shift 2
  [ $(el) -gt 230 ] && { echo "skip $n" >> $S; return; }
  timeout 60 build-gpu/moebench run --config configs/bench/$cfg.json --backend cuda --set expert_grad_dtype=bf16 \
    --set roofline=false --set align=16 --set check=off --steps 20 --warmup 8 --set warmup_s=3 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^  step ' $L/$n.log | awk '{print $2}') ms" >> $S
  grep -E '^# (clocks|energy)' $L/$n.log >> $S
  python3 -c "import json;d=json.load(open('$L/$n.json'));print('  json', d['throughput'].get('joules_per_step'), d['throughput'].get('tokens_per_joule'), [r.get('energy_j') for r in d['timing']['clocks']['ranks']])" >> $S 2>&1
}
go qwen3-ep1 qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true
go mixtral-bf16 mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream
go mixtral-fp8t mixtral_8x7b --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
