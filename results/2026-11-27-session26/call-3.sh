#!/usr/bin/env bash
# Session 26, call 3 (2 GPUs): the drift warning as committed (aebcb87), and steady-state steps:
# Mixtral-8x7B at EP 2 with lt_multistream after 18 and after 100 warm-up steps, auto with as
# many untimed steps (90 + its 10); DeepSeek-V3 at EP 2 after 8 and 100. SM clocks sampled.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];g=d['gemm'];l=t['lanes']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'method', g['method'], 'untimed', t['warmup_steps'] + g['added_warmup_steps'], 'drift', t['step_drift'], 'a2a', round(l['a2a']['median'],3), 'least', round(l['a2a_least_rank']['median'],3))
print('  steps', [round(x,1) for x in t['samples_ms']['step']])" 2>&1 | tail -2; }
clocks() {
  python3 - $1 <<'PY'
import sys, csv, statistics as st, collections
g = collections.defaultdict(list)
for r in csv.reader(open(sys.argv[1])):
    if len(r) < 3 or not r[0].strip().isdigit(): continue
    g[r[0].strip()].append(float(r[1].split()[0]))
for k, c in g.items():
    busy = [x for x in c]
    print(f"  gpu {k}: {len(c)} samples, SM MHz min {min(c):.0f} median {st.median(c):.0f}, last third median {st.median(c[2*len(c)//3:]):.0f}")
PY
}
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
COMMON="--backend cuda --set expert_grad_dtype=bf16 --set check=off --set roofline=false --timeout-s 120 --set align=16 --set mesh.ep=2 --set dispatch=nvlink"
go() {  # name config steps warmup method [more]
  local n=$1 cfg=$2 steps=$3 w=$4 m=$5; shift 5
  [ $(el) -gt 480 ] && { echo "skip $n" >> $S; return; }
  nvidia-smi --query-gpu=index,clocks.sm,power.draw --format=csv,noheader -lms 100 > $L/$n-smi.csv 2>&1 &
  local smi=$!
  timeout 150 $MPI build-gpu/moebench run --config configs/bench/$cfg.json $COMMON --steps $steps --warmup $w --set gemm.method=$m "$@" --out $L/$n.json > $L/$n.log 2>&1
  local rc=$?; kill $smi
  echo "== $n rc=$rc at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (warning|lanes)' $L/$n.log >> $S
  clocks $L/$n-smi.csv >> $S
}
go mixtral-lt-w18 mixtral_8x7b 20 18 lt_multistream --set tokens_per_rank=8192
go mixtral-lt-w100 mixtral_8x7b 30 100 lt_multistream --set tokens_per_rank=8192
go mixtral-auto-w90 mixtral_8x7b 30 90 auto --set tokens_per_rank=8192
go mixtral-sm90-w100 mixtral_8x7b 30 100 grouped_sm90 --set tokens_per_rank=8192
go deepseek-w8 deepseek_v3 20 8 grouped_sm90
go deepseek-w100 deepseek_v3 30 100 grouped_sm90
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
