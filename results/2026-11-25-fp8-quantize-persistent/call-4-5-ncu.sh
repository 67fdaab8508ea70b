#!/usr/bin/env bash
# Session 12, call 4 (one H200): where the 1 x 128 / 128 x 1 quantization (both ways) spends its
# time: ncu on the kAlong tile kernel in the GPU test with many groups, and its SASS.
set -uo pipefail
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moe_cuda_tests > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
NCU=/usr/local/cuda/bin/ncu
timeout 200 $NCU --kernel-name quantize_tiles_kernel --launch-count 1 --set full --print-details all build-gpu/tests/moe_cuda_tests --gtest_filter='*ManyGroupsAndTiles*block*' > $OUT/logs/ncu_along.txt 2>&1; echo "ncu rc=$?" >> $S
grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issue Slots Busy|Issued Ipc|Executed Ipc|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|No Eligible|One or More|Block Limit|L1/TEX Hit|Executed Instructions |Theoretical Occupancy|Shared Memory Configuration|Dynamic Shared" $OUT/logs/ncu_along.txt | head -60 >> $S
timeout 200 $NCU --kernel-name quantize_tiles_kernel --launch-count 1 --section InstructionStats --section WarpStateStats --section SourceCounters --print-details all --print-metric-instances details build-gpu/tests/moe_cuda_tests --gtest_filter='*ManyGroupsAndTiles*block*' > $OUT/logs/ncu_along_stalls.txt 2>&1; echo "ncu2 rc=$?" >> $S
CUOBJ=""
if [ -n "$CUOBJ" ]; then
  /usr/local/cuda/bin/nvcc -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -I. -cubin kernels/cuda/fp8_quantize.cu -o /tmp/q.cubin && $CUOBJ -sass /tmp/q.cubin > $OUT/logs/fp8_quantize.sass 2>&1; echo "sass rc=$? $(wc -l < $OUT/logs/fp8_quantize.sass)" >> $S
fi
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
