#!/usr/bin/env bash
# Session 17 (retry), the 2-GPU call (asked for nvidia-h200-x2, served by 2 H100s; 458 s of device
# time left): the tree at EP 2 as it stands after the FP8 and grouped-kernel sessions, none of
# which had 2 GPUs.
# Part A: checks against the GPU reference at EP 2 (grouped kernel with auto's per-GEMM choice,
# FP8 recipes, dispatch fp8 through each dispatcher, the pipeline, graph digests).
# Part B: the bench workloads at EP 2 (bf16 expert gradients, align 16), bf16 / FP8, by dispatcher.
# Cases that would start after DEADLINE seconds are skipped so that the results come back.
set -uo pipefail
START=$(date +%s)
DEADLINE=${DEADLINE:-240}
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
grep -B2 -A8 " error" $L/build.log | head -20 >> $S
B=build-gpu/moebench
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
# run NAME TIMEOUT ARGS...: one 2-rank run; its summary lines go to $S
run() {
  n=$1 t=$2; shift 2
  if [ "$(el)" -gt "$DEADLINE" ]; then echo "== $n skipped at $(el) s" >> $S; return; fi
  timeout $t $MPI $B run "$@" --backend cuda --set mesh.ep=2 --set align=16 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^# expert GEMMs' $L/$n.log | cut -c1-330 >> $S
  grep -E '^# check:|^# lanes|^# host|^# throughput|^# dispatch .* bytes|^  (step|experts_fwd|experts_bwd|a2a_dispatch_fwd|a2a_combine_fwd|a2a_dispatch_bwd|a2a_combine_bwd|dispatch_fwd|combine_fwd) ' $L/$n.log | cut -c1-260 >> $S
  grep -iE 'error|refus' $L/$n.log | head -3 >> $S
}
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2"  # FP8: the float64 reference (auto)
run A1_qwen3_bf16_dedup 60 --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=1024 --set dispatch=alltoall_dedup --set check=first --set reference=gpu --steps 2 --warmup 2 --set roofline=false
run A2_tiny_fp8block_dfp8_alltoall 30 $T --set precision=fp8_block --set dispatch_dtype=fp8 --set dispatch=alltoall
run A3_tiny_fp8block_dfp8_dedup_pipe 30 $T --set precision=fp8_block --set dispatch_dtype=fp8 --set dispatch=alltoall_dedup --set overlap=pipeline
run A4_tiny_fp8tensor_allgather_graph 30 $T --set precision=fp8_tensor --set dispatch=allgather --set graph=true
run A5_tiny_fp8tensor_allgather 30 $T --set precision=fp8_tensor --set dispatch=allgather
$B compare $L/A4_tiny_fp8tensor_allgather_graph.json $L/A5_tiny_fp8tensor_allgather.json 2>&1 | grep -E 'digests' | cut -c1-300 >> $S
BE="--set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 8"
DS="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 $BE"
MX="--config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 $BE"
QW="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=4096 $BE"
run B1_deepseek_bf16_dedup 60 $DS --set dispatch=alltoall_dedup
run B2_mixtral_bf16_alltoall 60 $MX --set dispatch=alltoall
run B3_qwen3_bf16_allgather_graph 45 $QW --set dispatch=allgather --set graph=true
run B4_deepseek_bf16_allgather 60 $DS --set dispatch=allgather
run B5_mixtral_fp8tensor_alltoall 60 $MX --set dispatch=alltoall --set precision=fp8_tensor
run B6_deepseek_fp8block_dfp8_dedup 60 $DS --set dispatch=alltoall_dedup --set precision=fp8_block --set dispatch_dtype=fp8
run B7_qwen3_bf16_dedup 45 $QW --set dispatch=alltoall_dedup
run B8_deepseek_fp8block_dedup 60 $DS --set dispatch=alltoall_dedup --set precision=fp8_block
run B9_mixtral_fp8block_dfp8_alltoall 60 $MX --set dispatch=alltoall --set precision=fp8_block --set dispatch_dtype=fp8
run B10_deepseek_bf16_alltoall 60 $DS --set dispatch=alltoall
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
