#!/usr/bin/env bash
# Session 28, call 2 (one GPU): L2 eviction hints in the grouped kernel (experiment switch
# MOE_EXP_HINT, not a key): 1 = the weight gradients' C stores evict_first, 2 = their operand
# loads evict_last, 4 = the row GEMMs' weight loads evict_first; 0 = none (the base, main's code).
# Variants built from one tree by recompiling grouped_gemm.cu alone and relinking moebench.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DBUILD_TESTING=OFF > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -o ')[0])")
VARS="1 3 4 7"
for v in $VARS; do
  mkdir -p build-gpu/v$v
  ( cd build-gpu && eval "$CMD -DMOE_EXP_HINT=$v -o v$v/grouped_gemm.cu.o" > $L/build-v$v.log 2>&1 ) &
done
cmake --build build-gpu -j12 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
for v in $VARS; do
  cp libmoe_cuda.a v$v/libmoe_cuda.a && ar r v$v/libmoe_cuda.a v$v/grouped_gemm.cu.o &&
    eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v$v/libmoe_cuda.a #; s# -o moebench # -o v$v/moebench #")"
  echo "v$v link rc=$? $(ls -la v$v/moebench | awk '{print $5}')" >> ../$S
done
cd ..
echo "all built at $(el) s" >> $S
bin() { [ $1 = 0 ] && echo build-gpu/moebench || echo build-gpu/v$1/moebench; }
G="--methods grouped_sm90 --iters 20 --set precision=bf16 --set expert_grad_dtype=bf16"
run() {  # variant config ep [more]
  local v=$1 cfg=$2 ep=$3; shift 3
  local n=gemm-h$v-$(basename $cfg .json)-ep$ep-r$r
  [ $(el) -gt 330 ] && { echo "skip $n" >> $S; return; }
  timeout 60 $(bin $v) gemm --config $cfg --ep $ep $G "$@" > $L/$n.log 2>&1
  echo "$n rc=$? $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad)' $L/$n.log | awk '{printf "%s %s | ", $1, $6}')" >> $S
}
for r in 1 2; do
  for cfg in "configs/bench/deepseek_v3.json 2" "configs/bench/deepseek_v3.json 1 --set align=16" "configs/bench/qwen3_30b_a3b.json 1" "configs/bench/mixtral_8x7b.json 1"; do
    for v in 0 $VARS; do run $v $cfg; done
  done
done
STEP="--backend cuda --set check=off --set roofline=false --steps 20 --warmup 8 --set expert_grad_dtype=bf16 --set gemm.method=grouped_sm90"
step() {  # variant config [more]
  local v=$1 cfg=$2; shift 2
  local n=step-h$v-$(basename $cfg .json)-r$r
  [ $(el) -gt 560 ] && { echo "skip $n" >> $S; return; }
  timeout 90 $(bin $v) run --config $cfg $STEP "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "$n rc=$? $(python3 -c "import json;d=json.load(open('$L/$n.json'));t=d['timing'];print('step', round(t['step']['median'],3), ' '.join(k+' '+str(round(v['median'],3)) for k,v in t.get('phases',{}).items() if k.startswith('experts')))" 2>&1 | tail -1)" >> $S
}
r=1
for v in 0 $VARS; do step $v configs/bench/qwen3_30b_a3b.json --set graph=true; done
for v in 0 3 7; do step $v configs/bench/deepseek_v3.json --set align=16; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
