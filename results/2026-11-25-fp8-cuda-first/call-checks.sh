#!/usr/bin/env bash
# FP8 on the CUDA backend: the check on real layer shapes (small token counts: the float64
# reference runs on the host), both recipes, H100, EP 1.
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1
cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -60; exit 1; }
B=build-gpu/moebench
mkdir -p $OUT/logs
S="$OUT/summary.txt"
chk() { n=$1; shift; timeout 280 $B run "$@" --backend cuda --set align=16 --set check=first --steps 2 --warmup 1 -o $OUT/logs/$n.json > $OUT/logs/$n.log 2>&1; echo "== $n rc=$?" >> $S; grep -E "^  (out|dx|dw_in|dw_out|dw_sh_in|dw_sh_out) |check:|reference \(" $OUT/logs/$n.log >> $S; }
for p in fp8_tensor fp8_block; do
  chk qwen_$p --config configs/bench/qwen3_30b_a3b.json --set precision=$p --set tokens_per_rank=256 &
  chk mixtral_$p --config configs/bench/mixtral_8x7b.json --set precision=$p --set tokens_per_rank=64 --set model.ffn=3584 &
  chk ds_$p --config configs/bench/deepseek_v3.json --set precision=$p --set tokens_per_rank=32 --set model.experts=32 --set router.groups=4 --set router.group_topk=2 &
  wait
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
