#!/usr/bin/env bash
# Session 17 (retry), call 2 on the same warm machine (2 H100s, the build of call 1 kept): the
# rest of the EP 2 table: dispatchers on Mixtral-8x7B and Qwen3-30B-A3B, FP8 without FP8 dispatch,
# the pipeline on DeepSeek-V3 (fp32 gradients), and a repeat of two bf16 steps.
# Cases that would start after DEADLINE seconds are skipped so that the results come back.
set -uo pipefail
START=$(date +%s)
DEADLINE=${DEADLINE:-110}
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $S
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
BE="--set check=off --steps 20 --warmup 8"
DS="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 $BE"
MX="--config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 $BE --set expert_grad_dtype=bf16"
QW="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=4096 $BE --set expert_grad_dtype=bf16"
run C1_mixtral_bf16_dedup 45 $MX --set dispatch=alltoall_dedup
run C2_mixtral_bf16_allgather 45 $MX --set dispatch=allgather
run C3_qwen3_bf16_alltoall 40 $QW --set dispatch=alltoall
run C4_qwen3_bf16_allgather 40 $QW --set dispatch=allgather
run C5_deepseek_fp32g_dedup 45 $DS --set dispatch=alltoall_dedup
run C6_deepseek_fp32g_dedup_pipe2 45 $DS --set dispatch=alltoall_dedup --set overlap=pipeline
run C7_mixtral_fp8block_alltoall 45 $MX --set dispatch=alltoall --set precision=fp8_block
run C8_mixtral_bf16_alltoall_again 45 $MX --set dispatch=alltoall
run C9_deepseek_bf16_dedup_again 45 $DS --set expert_grad_dtype=bf16 --set dispatch=alltoall_dedup
run C10_deepseek_fp8tensor_dedup 45 $DS --set expert_grad_dtype=bf16 --set dispatch=alltoall_dedup --set precision=fp8_tensor
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
