#!/usr/bin/env bash
# Session 17, call 6 (one H200): the tiny fp8_tensor check with one shared expert (the per-tensor
# amax hazard seen before) under each single method and the mix, to see whether the mix matters.
set -uo pipefail
mkdir -p $OUT/logs
S="$OUT/summary.txt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1; echo "build rc=$?" >> $S
T="--config configs/tiny.json --backend cuda --set align=16 --set check=every --steps 4 --warmup 2 --set precision=fp8_tensor --set model.shared_experts=1 --set model.shared_ffn=32"
for m in "lt" "sm90" "mix"; do
  case $m in
    lt) M="--set gemm.method=lt_multistream" ;;
    sm90) M="--set gemm.method=grouped_sm90" ;;
    mix) M="--set gemm.method=grouped_sm90 --set gemm.method_up=lt_multistream --set gemm.method_dgrad_x=lt_multistream --set gemm.method_wgrad_in=lt_multistream" ;;
  esac
  timeout 60 build-gpu/moebench run $T $M --out $OUT/logs/$m.json > $OUT/logs/$m.log 2>&1; echo "== $m rc=$?" >> $S
  python3 -c "
import json; j=json.load(open('$OUT/logs/$m.json'))
for c in j['correctness']['checks']:
    print(' step', c['step'], c['pass'], {k: round(v['rel_l2'], 5) for k, v in c['tensors'].items() if k in ('dx', 'dw_sh_in', 'out')})" >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
