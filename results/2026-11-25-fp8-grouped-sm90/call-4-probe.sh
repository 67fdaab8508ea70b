#!/usr/bin/env bash
# Session 13, call 4 (one H200): probes of the FP8 mainloop on Mixtral-8x7B's shapes: this tree;
# a build without promotion (the stage MMAs accumulate into one partial sum, results wrong,
# timing only); bf16 at 128 x 128 (ping-pong) for the tile's own limit.
set -uo pipefail
mkdir -p $OUT/logs probe
S="$OUT/summary.txt"
for f in *; do case $f in build-gpu|probe|old) ;; *) cp -r $f probe/;; esac; done
cd probe
sed -i 's/retire_previous(issue_stage(kt, part\[0\], false));/retire_previous(issue_stage(kt, part[0], kt > 0));/; s/retire_previous(issue_stage(kt + 1, part\[1\], false));/retire_previous(issue_stage(kt + 1, part[0], true));/; s/^        add_partial(acc\[0\], part\[1\]\[0\]);.*$//; s/^        add_partial(acc\[0\], part\[0\]\[0\]);$//' kernels/cuda/grouped_gemm.cu
grep -n "retire_previous(issue_stage" kernels/cuda/grouped_gemm.cu >> $S
cd ..
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j8 --target moebench > /tmp/build.log 2>&1 ) &
( cd probe && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake-p.log 2>&1 && cmake --build build-gpu -j8 --target moebench > /tmp/build-p.log 2>&1 ) &
wait
[ -x probe/build-gpu/moebench ] || { grep -B2 -A10 error /tmp/build-p.log | head -40; }
G="--config configs/bench/mixtral_8x7b.json --ep 1 --set tokens_per_rank=8192 --set align=16 --set expert_grad_dtype=bf16 --set precision=fp8_tensor --methods grouped_sm90 --iters 10"
for b in build-gpu probe/build-gpu; do
  for sch in cooperative pingpong; do
    echo "== $b $sch" >> $S
    timeout 80 $b/moebench gemm $G --set gemm.sm90_schedule=$sch > $OUT/logs/g.log 2>&1; grep -E "  (up|down|dgrad_a|dgrad_x) |dense" $OUT/logs/g.log | cut -c1-110 >> $S
  done
done
cat $S
