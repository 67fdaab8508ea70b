#!/usr/bin/env bash
# Session 17 (retry), call 3 on the same warm machine (2 H100s, the build of call 1 kept), run
# with DEADLINE=60: DeepSeek-V3 (64 experts) checked at EP 2 with auto's per-GEMM mix, and
# DeepSeek-V3 with dedup over NCCL's socket transport.
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
run D1_deepseek64_bf16_dedup_check 70 --config configs/bench/deepseek_v3.json --set model.experts=64 --set tokens_per_rank=2048 --set expert_grad_dtype=bf16 --set dispatch=alltoall_dedup --set check=first --set reference=gpu --steps 2 --warmup 2 --set roofline=false
MPI="$MPI -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
run D2_deepseek_bf16_dedup_socket 40 --config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 --set expert_grad_dtype=bf16 --set dispatch=alltoall_dedup --set check=off --steps 10 --warmup 4 --set roofline=false
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
