#!/usr/bin/env bash
# Session 18, call 1 on a 4-GPU machine (first 4-GPU kind lent): the owed GPU run of
# `moebench dispatch` (EP 2 and EP 4), checks at EP 4 and EP 2 x FSDP 2, and the bench
# workloads at EP 4 by dispatcher (bf16 expert gradients, align 16), FP8, the pipeline;
# gemm.algo bucket against auto at EP 2.
# Cases that would start after DEADLINE seconds are skipped so that the results come back.
set -uo pipefail
START=$(date +%s)
DEADLINE=${DEADLINE:-420}
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >> $S
nvidia-smi topo -m > $L/topo.txt 2>&1
if [ ! -x build-gpu/moebench ] || [ "${REBUILD:-1}" = 1 ]; then
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
grep -B2 -A8 " error" $L/build.log | head -20 >> $S
fi
B=build-gpu/moebench
mpi() { echo "mpirun --allow-run-as-root -np $1 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"; }
# run NP NAME TIMEOUT ARGS...: one NP-rank run (mesh.ep NP unless ARGS set it); summary lines to $S
run() {
  np=$1 n=$2 t=$3; shift 3
  if [ "$(el)" -gt "$DEADLINE" ]; then echo "== $n skipped at $(el) s" >> $S; return; fi
  timeout $t $(mpi $np) $B run --set mesh.ep=$np --set align=16 "$@" --backend cuda --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^# expert GEMMs' $L/$n.log | cut -c1-250 >> $S
  grep -E '^# check:|^# lanes|^# throughput|^# dispatch .* bytes|^  (step|experts_fwd|experts_bwd|a2a_dispatch_fwd|a2a_combine_fwd|a2a_dispatch_bwd|a2a_combine_bwd) ' $L/$n.log | cut -c1-200 >> $S
  grep -iE 'error|refus' $L/$n.log | head -3 >> $S
}
# dispatch bench (owed from last session: never run on a GPU)
for np in 2 4; do
  timeout 120 $(mpi $np) $B dispatch --backend cuda --config configs/bench/deepseek_v3.json --set mesh.ep=$np \
    --tokens 1024,2048,4096,8192 --out $L/dispatch_ep$np.json > $L/dispatch_ep$np.log 2>&1
  echo "== dispatch_ep$np rc=$? at $(el) s" >> $S
  grep -vE '^\[|^$' $L/dispatch_ep$np.log | tail -22 | cut -c1-200 >> $S
done
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2"
run 4 A1_tiny_alltoall 40 $T --set dispatch=alltoall
run 4 A2_tiny_dedup_pipe 40 $T --set dispatch=alltoall_dedup --set overlap=pipeline
run 4 A3_tiny_allgather_graph 40 $T --set dispatch=allgather --set graph=true
run 4 A4_tiny_fp8block_dfp8_dedup 40 $T --set precision=fp8_block --set dispatch_dtype=fp8 --set dispatch=alltoall_dedup
run 4 A5_tiny_fp8tensor_alltoall_ep2fsdp2 40 $T --set precision=fp8_tensor --set mesh.ep=2 --set mesh.fsdp=2
run 4 A6_qwen3_dedup_gpuref 90 --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=1024 --set dispatch=alltoall_dedup --set check=first --set reference=gpu --steps 2 --warmup 2 --set roofline=false
run 4 A7_deepseek_allgather_gpuref 90 --config configs/bench/deepseek_v3.json --set model.experts=64 --set tokens_per_rank=1024 --set dispatch=allgather --set check=first --set reference=gpu --steps 2 --warmup 2 --set roofline=false
BE="--set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 8"
DS="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 $BE"
MX="--config configs/bench/mixtral_8x7b.json --set tokens_per_rank=8192 $BE"
QW="--config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=4096 $BE"
for d in alltoall_dedup alltoall allgather; do
  run 4 B_deepseek_$d 60 $DS --set dispatch=$d
  run 4 B_mixtral_$d 60 $MX --set dispatch=$d
  run 4 B_qwen3_$d 60 $QW --set dispatch=$d
done
run 4 C1_deepseek_dedup_pipe2 60 $DS --set dispatch=alltoall_dedup --set overlap=pipeline
run 4 C2_mixtral_fp8tensor_alltoall 60 $MX --set dispatch=alltoall --set precision=fp8_tensor
run 4 C3_deepseek_fp8block_dfp8_dedup 60 $DS --set dispatch=alltoall_dedup --set precision=fp8_block --set dispatch_dtype=fp8
run 4 C4_deepseek_dedup_ep2fsdp2 60 $DS --set dispatch=alltoall_dedup --set mesh.ep=2 --set mesh.fsdp=2
run 4 C5_qwen3_allgather_graph 60 $QW --set dispatch=allgather --set graph=true
run 2 D1_mixtral_ep2_algo_auto 60 $MX --set dispatch=alltoall
run 2 D2_mixtral_ep2_algo_bucket 60 $MX --set dispatch=alltoall --set gemm.algo=bucket
run 2 D3_mixtral_ep2_algo_auto_again 60 $MX --set dispatch=alltoall
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
