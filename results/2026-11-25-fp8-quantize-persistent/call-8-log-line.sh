#!/usr/bin/env bash
# Session 12, call 8 (one H200): the final tree's auto tries log line; a tiny bf16 check with the
# default warm-up.
set -uo pipefail
mkdir -p $OUT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 && cmake --build build-gpu -j16 --target moebench > /tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
timeout 60 build-gpu/moebench run --config configs/tiny.json --backend cuda --steps 3 > $OUT/tiny_auto.log 2>&1; echo "rc=$?"
grep -E "gemm.method auto|expert GEMMs|warm-up \+|^# check" $OUT/tiny_auto.log
