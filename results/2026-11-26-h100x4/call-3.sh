#!/usr/bin/env bash
# Session 18, call 3 (4-GPU machine): the FP8 weight gradients' own quantization of gathered dye
# and dh (call 2: the pipelined FP8 checks failed on dw_in, dw_out). GPU tests of the FP8 FFN
# and the dispatch kernels; the pipelined FP8 checks again, on 4 GPUs; fp8_block pipeline
# against none with the grouped kernel (digests); NCCL with fewer channels beside the GEMMs.
set -uo pipefail
START=$(date +%s)
DEADLINE=${DEADLINE:-300}
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
grep -B2 -A8 " error" $L/build.log | head -20 >> $S
timeout 200 build-gpu/tests/moe_cuda_tests --gtest_filter='ExpertFfnFp8Cuda*:DispatchCudaMerged*:ExpertFfnCuda*' > $L/gpu_tests.log 2>&1
echo "gpu tests rc=$? at $(el) s" >> $S
grep -E "^\[  (PASSED|FAILED) |Failure" $L/gpu_tests.log | head -12 >> $S
B=build-gpu/moebench
MPI0="mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
run() {
  np=$1 n=$2 t=$3; shift 3
  if [ "$(el)" -gt "$DEADLINE" ]; then echo "== $n skipped at $(el) s" >> $S; return; fi
  timeout $t $MPI0 -np $np $B run --set mesh.ep=$np --set align=16 "$@" --backend cuda --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s" >> $S
  grep -E '^# expert GEMMs' $L/$n.log | cut -c1-140 >> $S
  grep -E '^# check:|^# lanes|^  (step|experts_fwd|experts_bwd) ' $L/$n.log | cut -c1-150 >> $S
  grep -E 'FAIL$|error|refus' $L/$n.log | head -4 >> $S
}
digests() { $B compare $L/$1.json $L/$2.json 2>&1 | grep -iE 'digest' | cut -c1-200 >> $S; }
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2"
P="--set overlap=pipeline"
run 4 A4_tiny_fp8block_dfp8_dedup_pipe2 40 $T $P --set precision=fp8_block --set dispatch_dtype=fp8 --set dispatch=alltoall_dedup
run 4 A5_tiny_fp8tensor_alltoall_pipe2_ep2fsdp2 40 $T $P --set precision=fp8_tensor --set mesh.ep=2 --set mesh.fsdp=2
run 4 A10_tiny_fp8tensor_allgather_pipe4_graph 40 $T $P --set overlap_chunks=4 --set precision=fp8_tensor --set dispatch=allgather --set graph=true
run 4 A11_tiny_fp8block_grouped_none 40 $T --set precision=fp8_block --set gemm.method=grouped_sm90
run 4 A12_tiny_fp8block_grouped_pipe4 40 $T $P --set overlap_chunks=4 --set precision=fp8_block --set gemm.method=grouped_sm90
digests A11_tiny_fp8block_grouped_none A12_tiny_fp8block_grouped_pipe4
run 4 A13_qwen3_fp8block_dedup_pipe2 120 --config configs/bench/qwen3_30b_a3b.json --set tokens_per_rank=256 $P --set dispatch=alltoall_dedup --set precision=fp8_block --set check=first --steps 2 --warmup 2 --set roofline=false
BE="--set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 8"
DS="--config configs/bench/deepseek_v3.json --set tokens_per_rank=4096 $BE"
run 4 C9_deepseek_fp8block_dedup_pipe2 60 $DS --set dispatch=alltoall_dedup $P --set precision=fp8_block
MPI0="$MPI0 -x NCCL_MAX_NCHANNELS=4"
run 4 E1_deepseek_dedup_none_nccl4ch 60 $DS --set dispatch=alltoall_dedup
run 4 E2_deepseek_dedup_pipe2_nccl4ch 60 $DS --set dispatch=alltoall_dedup $P
echo "done at $(el) s" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
