#!/usr/bin/env bash
# Session 31, call 5 (nvidia-h200-x2), main with this session's compare note: DeepSeek-V3 at EP 2
# with nvlink, checked with graph true, its digests against the run without graphs, both with
# gemm.method pinned to grouped_sm90; moebench compare of the pair and of call 4's kind of pair.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
MPI="mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY"
C="--config bench/deepseek_v3 --backend cuda --set mesh.ep=2 --set dispatch=nvlink --set align=16 --steps 3 --warmup 2 --set warmup_s=0 --timeout-s 300 --set expert_grad_dtype=bf16"
timeout 330 $MPI $B run $C --set gemm.method=grouped_sm90 --set graph=true --set check=first --out $L/chk-ds.json > $L/chk-ds.log 2>&1
echo "== ds graph check rc=$? at $(el) s: $(grep -E '^# (check|host):' $L/chk-ds.log | cut -c1-120 | tr '\n' ' ')" >> $S
timeout 100 $MPI $B run $C --set gemm.method=grouped_sm90 --set graph=false --set check=off --out $L/nog-ds.json > $L/nog-ds.log 2>&1
echo "== ds no graph rc=$? at $(el) s" >> $S
timeout 100 $MPI $B run $C --set gemm.method=auto --set graph=false --set check=off --out $L/auto-ds.json > $L/auto-ds.log 2>&1
echo "== ds auto no graph rc=$? at $(el) s: $(grep -E '^# expert GEMMs' $L/auto-ds.log | cut -c1-200)" >> $S
$B compare $L/chk-ds.json $L/nog-ds.json > $L/compare-pinned.log 2>&1
echo "== compare pinned rc=$?: $(grep '^# digests' $L/compare-pinned.log)" >> $S
$B compare $L/chk-ds.json $L/auto-ds.json > $L/compare-auto.log 2>&1
echo "== compare auto rc=$?: $(grep '^# digests' $L/compare-auto.log)" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
