#!/usr/bin/env bash
# Session 26, call 2 (2 GPUs): the lanes' least-rank all-to-all time (the wait for slower ranks)
# on the bench workloads at EP 2; and gemm.method auto's 1.5 ms gap on Mixtral-8x7B at EP 2: auto
# against lt_multistream fixed with the same warm-up (8) and with as many untimed steps as auto
# runs (18), each step's time and the GPUs' SM clocks and power sampled every 50 ms.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];g=d['gemm'];l=t['lanes']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'method', g['method'], 'untimed', d['timing']['warmup_steps'] + g['added_warmup_steps'], 'a2a', round(l['a2a']['median'],3), 'least', round(l['a2a_least_rank']['median'],3), 'wait share', round(l['a2a_wait_share'],3))
print('  steps', [round(x,1) for x in t['samples_ms']['step']])" 2>&1 | tail -2; }
clocks() {  # log: min / median SM clock and max power over the run, per GPU
  python3 - $1 <<'PY'
import sys, csv, statistics as st, collections
g = collections.defaultdict(list)
for r in csv.reader(open(sys.argv[1])):
    if len(r) < 5 or not r[0].strip().isdigit(): continue
    g[r[0].strip()].append((float(r[1].split()[0]), float(r[2].split()[0]), r[4].strip()))
for k, v in g.items():
    c = [x[0] for x in v]; p = [x[1] for x in v]
    print(f"  gpu {k}: {len(v)} samples, SM MHz min {min(c):.0f} median {st.median(c):.0f}, power max {max(p):.0f} W, throttle reasons {sorted(set(x[2] for x in v))}")
PY
}
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 90 --steps 20 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
for r in 1 2; do
  for v in "auto 8" "lt_multistream 8" "lt_multistream 18"; do
    set -- $v
    n=mixtral-$1-w$2-r$r
    [ $(el) -gt 420 ] && { echo "skip $n" >> $S; continue; }
    nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > $L/$n-smi.csv 2>&1 &
    SMI=$!
    timeout 120 $MPI build-gpu/moebench run --config configs/bench/mixtral_8x7b.json $COMMON --warmup $2 --set tokens_per_rank=8192 --set gemm.method=$1 --out $L/$n.json > $L/$n.log 2>&1
    rc=$?; kill $SMI
    echo "== $n rc=$rc at $(el) s: $(row $L/$n.json)" >> $S
    clocks $L/$n-smi.csv >> $S
  done
done
for m in deepseek_v3 qwen3_30b_a3b; do
  n=$m-ep2
  timeout 150 $MPI build-gpu/moebench run --config configs/bench/$m.json $COMMON --warmup 8 --set gemm.method=grouped_sm90 --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# lanes|^  (experts|a2a_)' $L/$n.log >> $S
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
