#!/usr/bin/env bash
# Session 43, call 4 (nvidia-h200-x2): main cfe6205 + the alltoall dispatcher's one recv_at offset
# (review leftover): GPU tests and the alltoall checks at EP 1 (align 16 and 1) and EP 2. Beside
# them on GPU 1: is the weight gradients' run-to-run spread (call 1: Qwen3-30B-A3B wgrad_in 0.49
# or 0.58-0.61 ms, wgrad_out 0.256 or 0.30-0.31, per process) a property of the process? Eight
# processes of `moebench gemm`, then four under ncu (DRAM bytes, L2 hit rate, tensor pipes).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
gpu0() {
  CUDA_VISIBLE_DEVICES=0 timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
  echo "GPU0 tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
  grep -E '^\[  FAILED' $L/tests.log | head -10 >> $S
  for a in 16 1; do
    CUDA_VISIBLE_DEVICES=0 timeout 120 $B run --backend cuda --config bench/qwen3_30b_a3b --set dispatch=alltoall --set align=$a --set check=first --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 > $L/check-qw-ep1-align$a.log 2>&1
    echo "GPU0 check qwen3 alltoall ep 1 align $a rc=$? at $(el) s: $(grep -E '^# check' $L/check-qw-ep1-align$a.log)" >> $S
  done
  CUDA_VISIBLE_DEVICES=0 timeout 150 $B run --backend cuda --config bench/deepseek_v3 --set tokens_per_rank=1024 --set dispatch=alltoall --set align=16 --set check=first --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 > $L/check-ds-ep1.log 2>&1
  echo "GPU0 check deepseek 1024 alltoall ep 1 rc=$? at $(el) s: $(grep -E '^# check' $L/check-ds-ep1.log)" >> $S
}
gpu1() {
  for i in 1 2 3 4 5 6 7 8; do
    CUDA_VISIBLE_DEVICES=1 timeout 60 $B gemm --config bench/qwen3_30b_a3b --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 50 > $L/gemm-qw-$i.log 2>&1
    echo "GPU1 gemm qw process $i rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/gemm-qw-$i.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/gemm-qw-$i.log)" >> $S
  done
  M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
  for i in 1 2 3 4; do
    CUDA_VISIBLE_DEVICES=1 timeout 120 /usr/local/cuda/bin/ncu --clock-control none --cache-control none --csv -k regex:grouped_gemm_kernel --metrics $M $B gemm --config bench/qwen3_30b_a3b --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 3 > $L/ncu-qw-$i.csv 2> $L/ncu-qw-$i.err
    echo "GPU1 ncu qw process $i rc=$? at $(el) s (layout 2: the weight gradients)" >> $S
    python3 results/2026-11-29-session42/ncu_parse.py $L/ncu-qw-$i.csv 2>&1 | grep -E "layout 2" >> $S
  done
}
gpu0 & gpu1 & wait
ep2() {  # tag [more]
  local n=$1; shift
  timeout 200 mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --backend cuda --set mesh.ep=2 --set dispatch=alltoall --set align=16 --set roofline=false \
    --timeout-s 180 --set check=first --set warmup_s=0 --steps 2 --warmup 1 "$@" > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check' $L/$n.log)" >> $S
}
ep2 check-qw-ep2 --config bench/qwen3_30b_a3b
ep2 check-ds-ep2 --config bench/deepseek_v3 --set tokens_per_rank=1024
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
