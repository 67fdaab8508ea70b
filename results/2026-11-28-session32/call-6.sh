#!/usr/bin/env bash
# Session 32, call 6 (one H200): call 5's wgmma_wait<2> (v1) against main (v0) in steps, alternating; the check on v1.
# Session 32, call 5 (one H200): call 4 again, its release of the second stage at the tile's end mended (call 4 hung: an edit put it in the wrong branch); GPU tests on v1.
# Session 32, call 4 (one H200): v1 = the bf16 mainloop keeps two stages' MMAs in flight (wgmma_wait<2>), v0 main.
# Session 32, call 3 (one H200): which part of the half tiles slows the single-CTA row GEMMs and
# hangs fp8_block. v0: main's grouped_gemm.cu; vN: this tree with -DMOE_EXP_HALF=N, bit 1: load
# only the live A halves, bit 2: the idle warpgroup skips its MMAs (and waits at the tile's end).
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -c ')[0])")
for v in 0 1; do mkdir -p build-gpu/v$v; done
( cd build-gpu && eval "$CMD -c $PWD/../devrun/base_grouped_gemm.cu -o v0/grouped_gemm.cu.o" > $L/build-v0.log 2>&1 ) &
( cd build-gpu && eval "$CMD -DMOE_EXP_DEPTH=2 -c $PWD/../kernels/cuda/grouped_gemm.cu -o v1/grouped_gemm.cu.o" > $L/build-v1.log 2>&1 ) &
cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
for v in 0 1; do
cp libmoe_cuda.a v$v/libmoe_cuda.a && ar r v$v/libmoe_cuda.a v$v/grouped_gemm.cu.o &&
  eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v$v/libmoe_cuda.a #; s# -o moebench # -o v$v/moebench #")"
echo "v$v link rc=$?" >> $S
done

cd ..
echo "all built at $(el) s" >> $S
gm() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 200 ] && { echo "skip $n v$v" >> $S; return; }
  timeout $TO build-gpu/v$v/moebench gemm --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n-v$v.log | grep -v dense | awk '{printf "%s %s  ", $1, $6}')" >> $S
}
st() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 190 ] && { echo "skip step $n v$v" >> $S; return; }
  timeout 40 build-gpu/v$v/moebench run --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 --set check=off --set gemm.method=grouped_sm90 --steps 20 --warmup 8 "$@" --out $L/step-$n-v$v.json > $L/step-$n-v$v.log 2>&1
  echo "== step $n v$v rc=$? at $(el) s: $(grep -E '^  (experts_fwd|experts_bwd|step) ' $L/step-$n-v$v.log | awk '{printf "%s %s  ", $1, $2}') $(grep -E '^# clocks' $L/step-$n-v$v.log | cut -c10-30)" >> $S
}
for r in 1 2; do for v in 0 1; do st $v ds1-r$r --config bench/deepseek_v3 --set warmup_s=2; done; done
for r in 1 2; do for v in 1 0; do st $v qw-r$r --config bench/qwen3_30b_a3b --set graph=true --set warmup_s=2; done; done
[ $(el) -lt 185 ] && { timeout 40 build-gpu/v1/moebench run --config bench/qwen3_30b_a3b --backend cuda --set align=16 --steps 3 --warmup 2 --set warmup_s=0 --set gemm.method=grouped_sm90 --set graph=true --set check=first > $L/chk-qw-v1.log 2>&1; echo "== check qw v1 rc=$? at $(el) s: $(grep -E '^# check:' $L/chk-qw-v1.log)" >> $S; }
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
