#!/usr/bin/env bash
# Session 18, call 2 (4-GPU machine): the pipeline's weight gradients once over all chunks
# (merge_chunk_layout + gather_chunk_rows, new kernels). Part A: the new kernels' GPU tests and
# the dispatch / FFN tests; Part B: checks of the pipelined step on 4 and 2 GPUs (every
# dispatcher, bf16 gradients now allowed, FP8, graph) and pipeline vs none digests with the
# grouped kernel; Part C: the bench workloads, none against pipeline, bf16 expert gradients.
# Cases that would start after DEADLINE seconds are skipped so that the results come back.
set -uo pipefail
START=$(date +%s)
DEADLINE=${DEADLINE:-460}
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
grep -B2 -A8 " error" $L/build.log | head -20 >> $S
timeout 150 build-gpu/tests/moe_cuda_tests --gtest_filter='DispatchCuda*:ExpertFfnCuda*:GroupedGemmSm90.AddsInto*' > $L/gpu_tests.log 2>&1
echo "gpu tests rc=$? at $(el) s" >> $S
grep -E "^\[  (PASSED|FAILED) |tests? ran|Failure" $L/gpu_tests.log | head -12 >> $S
B=build-gpu/moebench
mpi() { echo "mpirun --allow-run-as-root -np $1 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"; }
# run NP NAME TIMEOUT ARGS...: one NP-rank run (mesh.ep NP unless ARGS set it); summary lines to $S
run() {
  np=$1 n=$2 t=$3; shift 3
  if [ "$(el)" -gt "$DEADLINE" ]; then echo "== $n skipped at $(el) s" >> $S; return; fi
  timeout $t $(mpi $np) $B run --set mesh.ep=$np --set align=16 "$@" --backend cuda --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^# expert GEMMs' $L/$n.log | cut -c1-160 >> $S
  grep -E '^# check:|^# lanes|^# host|^  (step|experts_fwd|experts_bwd) ' $L/$n.log | cut -c1-170 >> $S
  grep -iE 'error|refus' $L/$n.log | head -3 >> $S
}
digests() { $B compare $L/$1.json $L/$2.json 2>&1 | grep -iE 'digest' | cut -c1-200 >> $S; }
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2"
P="--set overlap=pipeline"
run 4 A1_tiny_alltoall_pipe4 40 $T $P --set overlap_chunks=4 --set dispatch=alltoall
run 4 A2_tiny_dedup_pipe2_bf16g 40 $T $P --set dispatch=alltoall_dedup --set expert_grad_dtype=bf16
run 4 A3_tiny_allgather_pipe4_graph 40 $T $P --set overlap_chunks=4 --set dispatch=allgather --set graph=true
run 4 A4_tiny_fp8block_dfp8_dedup_pipe2 40 $T $P --set precision=fp8_block --set dispatch_dtype=fp8 --set dispatch=alltoall_dedup
run 4 A5_tiny_fp8tensor_alltoall_pipe2_ep2fsdp2 40 $T $P --set precision=fp8_tensor --set mesh.ep=2 --set mesh.fsdp=2
run 4 A6_tiny_dedup_grouped_none 40 $T --set dispatch=alltoall_dedup --set gemm.method=grouped_sm90
run 4 A7_tiny_dedup_grouped_pipe4 40 $T $P --set overlap_chunks=4 --set dispatch=alltoall_dedup --set gemm.method=grouped_sm90
digests A6_tiny_dedup_grouped_none A7_tiny_dedup_grouped_pipe4
run 4 A8_qwen3_dedup_pipe2_gpuref 90 --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=1024 $P --set dispatch=alltoall_dedup --set expert_grad_dtype=bf16 --set check=first --set reference=gpu --steps 2 --warmup 2 --set roofline=false
run 4 A9_deepseek64_alltoall_pipe2_gpuref 90 --config configs/bench/deepseek_v3.json --set model.experts=64 --set tokens_per_rank=1024 $P --set dispatch=alltoall --set check=first --set reference=gpu --steps 2 --warmup 2 --set roofline=false
BE="--set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 8"
DS="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 $BE"
MX="--config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 $BE"
QW="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=4096 $BE"
run 4 C1_deepseek_dedup_none 60 $DS --set dispatch=alltoall_dedup
run 4 C2_deepseek_dedup_pipe2 60 $DS --set dispatch=alltoall_dedup $P
run 4 C3_deepseek_dedup_pipe4 60 $DS --set dispatch=alltoall_dedup $P --set overlap_chunks=4
run 4 C4_mixtral_alltoall_none 60 $MX --set dispatch=alltoall
run 4 C5_mixtral_alltoall_pipe2 60 $MX --set dispatch=alltoall $P
run 4 C6_qwen3_dedup_none 60 $QW --set dispatch=alltoall_dedup
run 4 C7_qwen3_dedup_pipe2 60 $QW --set dispatch=alltoall_dedup $P
run 4 C8_deepseek_allgather_pipe2 60 $DS --set dispatch=allgather $P
run 2 D1_deepseek_ep2_dedup_none 60 $DS --set dispatch=alltoall_dedup
run 2 D2_deepseek_ep2_dedup_pipe2 60 $DS --set dispatch=alltoall_dedup $P
run 2 D3_mixtral_ep2_alltoall_pipe2 60 $MX --set dispatch=alltoall $P
run 2 D4_mixtral_ep2_alltoall_none 60 $MX --set dispatch=alltoall
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
