#!/usr/bin/env bash
# Session 18, call 6 (4-GPU machine): the rest of the EP 4 dispatcher x schedule table with the
# pipeline's weight gradients once (bf16 expert gradients, auto GEMMs), and the three dispatchers
# on DeepSeek-V3 over NCCL's socket transport (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), what an
# inter-node link looks like to the step.
set -uo pipefail
START=$(date +%s)
DEADLINE=${DEADLINE:-300}
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
MPI0="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
run() {
  np=$1 n=$2 t=$3; shift 3
  if [ "$(el)" -gt "$DEADLINE" ]; then echo "== $n skipped at $(el) s" >> $S; return; fi
  timeout $t $MPI0 -np $np $B run --set mesh.ep=$np --set align=16 "$@" --backend cuda --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^# lanes|^# throughput|^  (step|experts_fwd|experts_bwd) ' $L/$n.log | cut -c1-150 >> $S
  grep -E 'error|refus' $L/$n.log | head -4 >> $S
}
BE="--set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 8"
DS="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 $BE"
MX="--config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 $BE"
QW="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=4096 $BE"
P="--set overlap=pipeline"
run 4 G1_deepseek_alltoall_pipe2 60 $DS --set dispatch=alltoall $P
run 4 G2_mixtral_dedup_pipe2 60 $MX --set dispatch=alltoall_dedup $P
run 4 G3_mixtral_allgather_pipe2 60 $MX --set dispatch=allgather $P
run 4 G4_qwen3_alltoall_pipe2 60 $QW --set dispatch=alltoall $P
run 4 G5_qwen3_allgather_pipe2 60 $QW --set dispatch=allgather $P
MPI0="$MPI0 -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
SO="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 --set expert_grad_dtype=bf16 --set check=off --steps 10 --warmup 4 --set roofline=false"
run 4 H1_deepseek_dedup_socket 90 $SO --set dispatch=alltoall_dedup
run 4 H2_deepseek_allgather_socket 90 $SO --set dispatch=allgather
run 4 H3_deepseek_alltoall_socket 120 $SO --set dispatch=alltoall
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
