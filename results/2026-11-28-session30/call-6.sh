#!/usr/bin/env bash
# Session 30, call 6 (1 GPU): main at its last commit: all GPU tests; a checked CUDA run with
# --dump (verified by scripts/verify_dump.py); the new refusals on the CUDA build.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests.log 2>&1
echo "all GPU tests rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests.log | tr '\n' ' ')" >> $S
grep -E '^\[  FAILED' $L/tests.log | head >> $S
timeout 120 $B run --config tiny --backend cuda --set check=first --steps 2 --set model.hidden=256 --set model.ffn=128 --set tokens_per_rank=256 --dump $L/dump --out $L/r.json > $L/r.log 2>&1
echo "== run with --dump rc=$? at $(el) s: $(grep -E '^# check' $L/r.log)" >> $S
timeout 120 python3 scripts/verify_dump.py $L/dump > $L/verify.log 2>&1
echo "== verify_dump rc=$?: $(tail -1 $L/verify.log)" >> $S
rm -rf $L/dump
touch $L/afile
$B run --config tiny --backend cuda --dump $L/afile/d > $L/e1.log 2>&1; echo "== --dump under a file rc=$? (want 2): $(grep -m1 error $L/e1.log)" >> $S
$B run --config tiny --backend cuda --timeout-s nan > $L/e2.log 2>&1; echo "== --timeout-s nan rc=$? (want 2): $(head -1 $L/e2.log)" >> $S
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
