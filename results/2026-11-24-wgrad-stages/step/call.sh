#!/usr/bin/env bash
# Session 9, call 6: the final weight-gradient kernel: all GPU tests, the check in the step, and
# step timings against HEAD in the same call.
set -uo pipefail
T0=$(date +%s)
L=$(mktemp -d)
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader > $S
rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf devrun/base.tgz -C /tmp/base
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 && cmake --build build-gpu -j10 > $L/build.log 2>&1 ) &
P1=$!
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake_base.log 2>&1 && cmake --build /tmp/base/build -j6 --target moebench > $L/build_base.log 2>&1 )
wait $P1; r1=$?
echo "built rc=$r1 in $(( $(date +%s) - T0 )) s" >> $S
[ $r1 = 0 ] || { grep -E "error" -A3 $L/build.log | head -40 >> $S; cat $S; exit 1; }
timeout 300 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1; rc=$?
echo "gpu tests rc=$rc $(grep -E '^\[  (FAILED|PASSED) ' $L/tests.log | tr '\n' ' ')" >> $S
ck() { local n=$1; shift
  timeout 200 build-gpu/moebench run "$@" --set gemm.method=grouped_sm90 --set check=first --set reference=gpu --steps 10 --warmup 3 -o $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? $(grep -E '^# check' $L/$n.log)" >> $S; grep -iE "error|fall" $L/$n.log | head -3 >> $S
}
ck check_qwen_fp32 --config configs/bench/qwen3_30b_a3b.json
ck check_qwen_bf16 --config configs/bench/qwen3_30b_a3b.json --set expert_grad_dtype=bf16 --set align=16
ck check_mixtral --config configs/bench/mixtral_8x7b.json --set tokens_per_rank=1024
ck check_ds64 --config configs/bench/deepseek_v3.json --set model.experts=64 --set tokens_per_rank=2048
st() { local n=$1 b=$2; shift 2
  timeout 200 $b run "$@" --set gemm.method=grouped_sm90 --steps 20 --warmup 5 -o $L/$n.json > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^ *(experts_fwd|experts_bwd|step) ' $L/$n.log | awk '{printf "%s %s | ", $1, $2}') $(grep -o "[0-9.]* TFLOP/s per rank (model" $L/$n.log)" >> $S
}
echo "== steps after $(( $(date +%s) - T0 )) s" >> $S
for w in "qwen3_30b_a3b 8192" "mixtral_8x7b 8192" "deepseek_v3 4096"; do
  set -- $w
  for dt in bf16 fp32; do
    for v in base new base2 new2; do
      b=build-gpu/moebench; [[ $v == base* ]] && b=/tmp/base/build/moebench
      st ${1}_${dt}_$v $b --config configs/bench/$1.json --set tokens_per_rank=$2 --set expert_grad_dtype=$dt
    done
  done
done
echo "all done after $(( $(date +%s) - T0 )) s" >> $S
cd $L && rm -f build*.log && tar czf $OUT/s9d.tgz .
cat $S
