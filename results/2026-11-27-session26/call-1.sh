#!/usr/bin/env bash
# Session 26, call 1 (one H100): the FP8 kernel's review refactor (frag_row, stage_scales,
# weight_tile_scale) against its base 60b34c5: all GPU tests, fp8 moebench gemm both trees; and
# where Qwen3-30B-A3B's EP 1 step spends its time now (phase table, ncu per-kernel durations).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
mkdir -p /tmp/base && tar xf devrun/base.tar -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-base.log 2>&1 &&
  cmake --build /tmp/base/build -j8 --target moebench > $L/build-base.log 2>&1; echo "build base rc=$? at $(el) s" >> $S ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j10 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests_all.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests_all.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests_all.log | head >> $S
run() {  # tree config ep precision round
  local b=build-gpu/moebench; [ $1 = base ] && b=/tmp/base/build/moebench
  local n=$1-$(basename $2 .json)-ep$3-$4-r$5
  [ $(el) -gt 450 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $b gemm --config $2 --ep $3 --methods grouped_sm90 --iters 10 --set align=16 --set expert_grad_dtype=bf16 --set precision=$4 > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  (up|down|dgrad|wgrad)' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
for r in 1 2; do
  for cfg in "configs/bench/deepseek_v3.json 2 fp8_block" "configs/bench/qwen3_30b_a3b.json 1 fp8_block" "configs/bench/deepseek_v3.json 2 fp8_tensor"; do
    set -- $cfg
    for t in base new; do run $t $1 $2 $3 $r; done
  done
done
B=build-gpu/moebench
COMMON="--backend cuda --set align=16 --set expert_grad_dtype=bf16 --set check=off --set roofline=false --set gemm.method=grouped_sm90 --timeout-s 60"
m=qwen3_30b_a3b
timeout 60 $B run --config configs/bench/$m.json $COMMON --steps 20 --warmup 8 --out $L/$m-step.json > $L/$m-step.log 2>&1
echo "== $m step rc=$? at $(el) s" >> $S
sed -n '/# phase/,/# host/p' $L/$m-step.log >> $S
timeout 100 /usr/local/cuda/bin/ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
  $B run --config configs/bench/$m.json $COMMON --steps 1 --warmup 6 --profile > $L/$m-ncu.csv 2> $L/$m-ncu.err
echo "== $m ncu rc=$? at $(el) s" >> $S
python3 - $L/$m-ncu.csv >> $S <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
tot = collections.OrderedDict(); n = collections.Counter()
for r in rows[1:]:
    k = re.sub(r"<.*", "", r[ki])[:60]
    v = float(r[vi].replace(",", "")); v = v / 1000 if r[ui] == "nsecond" else v
    tot[k] = tot.get(k, 0) + v; n[k] += 1
s = sum(tot.values())
print(f"ncu kernels: {sum(n.values())} launches, {s:.1f} us")
for k, v in sorted(tot.items(), key=lambda x: -x[1]): print(f"  {v:9.1f} us  x{n[k]:3d}  {k}")
PY
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
