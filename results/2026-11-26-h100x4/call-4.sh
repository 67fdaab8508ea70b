#!/usr/bin/env bash
# Session 18, call 4 (4-GPU machine): gemm.sm90_ctas, the grouped kernel's persistent grid kept
# below the SM count so that the pipeline's collectives beside it get SMs. DeepSeek-V3 and
# Qwen3-30B-A3B at EP 4 with gemm.method grouped_sm90, none and pipeline 2, by sm90_ctas; and
# the results bitwise equal whatever the grid (tiny, digests).
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
grep -B2 -A8 " error" $L/build.log | head -20 >> $S
B=build-gpu/moebench
MPI0="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
run() {
  np=$1 n=$2 t=$3; shift 3
  if [ "$(el)" -gt "$DEADLINE" ]; then echo "== $n skipped at $(el) s" >> $S; return; fi
  timeout $t $MPI0 -np $np $B run --set mesh.ep=$np --set align=16 "$@" --backend cuda --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^# check:|^# lanes|^  (step|experts_fwd|experts_bwd) ' $L/$n.log | cut -c1-150 >> $S
  grep -E 'FAIL$|error|refus' $L/$n.log | head -4 >> $S
}
digests() { $B compare $L/$1.json $L/$2.json 2>&1 | grep -iE 'digest' | cut -c1-200 >> $S; }
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2 --set gemm.method=grouped_sm90"
P="--set overlap=pipeline"
run 4 A1_tiny_dedup_pipe4_ctas0 40 $T $P --set overlap_chunks=4 --set dispatch=alltoall_dedup
run 4 A2_tiny_dedup_pipe4_ctas6 40 $T $P --set overlap_chunks=4 --set dispatch=alltoall_dedup --set gemm.sm90_ctas=6
digests A1_tiny_dedup_pipe4_ctas0 A2_tiny_dedup_pipe4_ctas6
BE="--set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 8 --set gemm.method=grouped_sm90"
DS="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 $BE --set dispatch=alltoall_dedup"
QW="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=4096 $BE --set dispatch=alltoall_dedup"
run 4 B1_deepseek_none_ctas0 60 $DS
run 4 B2_deepseek_pipe2_ctas0 60 $DS $P
run 4 B3_deepseek_pipe2_ctas116 60 $DS $P --set gemm.sm90_ctas=116
run 4 B4_deepseek_pipe2_ctas100 60 $DS $P --set gemm.sm90_ctas=100
run 4 B5_deepseek_pipe2_ctas84 60 $DS $P --set gemm.sm90_ctas=84
run 4 B6_deepseek_none_ctas116 60 $DS --set gemm.sm90_ctas=116
run 4 B7_deepseek_pipe4_ctas100 60 $DS $P --set overlap_chunks=4 --set gemm.sm90_ctas=100
run 4 C1_qwen3_none_ctas0 60 $QW
run 4 C2_qwen3_pipe2_ctas0 60 $QW $P
run 4 C3_qwen3_pipe2_ctas100 60 $QW $P --set gemm.sm90_ctas=100
run 2 D1_deepseek_ep2_none 60 $DS
run 2 D2_deepseek_ep2_pipe2_ctas100 60 $DS $P --set gemm.sm90_ctas=100
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
