#!/usr/bin/env bash
# Session 18, call 7 (2-GPU machine), commit 839ea41: the review's GrownBuffer (MoeLayer's rows,
# alltoall's landing rows, the dispatch bench) and the grouped kernel's tests after
# gemm.sm90_ctas (fcbebb4), whose GPU test suite had not run since.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
T="--config configs/tiny.json --set check=every --steps 3 --warmup 2 --backend cuda --set mesh.ep=2"
for v in "alltoall|--set align=16" "alltoall_pipe4|--set align=16 --set overlap=pipeline --set overlap_chunks=4" "dedup_pipe2_fp8block|--set align=16 --set dispatch=alltoall_dedup --set overlap=pipeline --set precision=fp8_block"; do
  n=${v%%|*}; a=${v#*|}
  timeout 40 $MPI $B run $T $a --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(grep -E '^# check:' $L/$n.log)" >> $S
done
timeout 40 $MPI $B dispatch --backend cuda --config configs/tiny.json --set mesh.ep=2 --tokens 32,64 > $L/dispatch.log 2>&1
echo "== dispatch rc=$? at $(el) s" >> $S
timeout 100 build-gpu/tests/moe_cuda_tests --gtest_filter='GroupedGemmSm90*' > $L/gpu_tests.log 2>&1
echo "grouped tests rc=$? at $(el) s" >> $S
grep -E "^\[  (PASSED|FAILED) |Failure" $L/gpu_tests.log | head -8 >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
