#!/usr/bin/env bash
# Session 29, call 6 (1 GPU): with moebench gemm --rows routed, where the skewed routing's row
# GEMMs lose their time. (1) ncu on main's grouped GEMMs at DeepSeek-V3 EP 2, balanced against
# routed rows (L2 and DRAM bytes, tensor pipe). (2) Session 21's idle warpgroup (a cooperative
# warpgroup whose 64 rows all lie past its group's end issues no MMAs) measured on routed rows:
# tree v1 (-DMOE_EXP_IDLE=1 default) against v0 (main's kernel), alternating.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > $L/cmake.log 2>&1
CMD=$(python3 -c "
import json
for e in json.load(open('build-gpu/compile_commands.json')):
    if e['file'].endswith('kernels/cuda/grouped_gemm.cu'): print(e['command'].split(' -o ')[0])")
mkdir -p build-gpu/v0
( cd build-gpu && eval "$CMD -DMOE_EXP_IDLE=0 -o v0/grouped_gemm.cu.o" > $L/build-v0.log 2>&1 ) &
cmake --build build-gpu -j16 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
wait
cd build-gpu
LINK=$(ninja -t commands moebench | tail -1 | sed 's/^: && //; s/ && :$//')
cp libmoe_cuda.a v0/libmoe_cuda.a && ar r v0/libmoe_cuda.a v0/grouped_gemm.cu.o &&
  eval "$(echo "$LINK" | sed "s# libmoe_cuda.a # v0/libmoe_cuda.a #; s# -o moebench # -o v0/moebench #")"
echo "v0 link rc=$?" >> $S
mkdir -p v1 && cp moebench v1/moebench
cd ..
echo "all built at $(el) s" >> $S
G="gemm --config bench/deepseek_v3 --ep 2 --set expert_grad_dtype=bf16 --set align=16 --methods grouped_sm90"
M=gpu__time_duration.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second
for rows in balanced routed; do
  timeout 100 /usr/local/cuda/bin/ncu --clock-control none --metrics $M --csv --kernel-name regex:grouped_gemm_kernel \
    build-gpu/v0/moebench $G --iters 1 --rows $rows > $L/ncu-$rows.csv 2> $L/ncu-$rows.err
  echo "== ncu v0 $rows rc=$? at $(el) s" >> $S
  python3 - $L/ncu-$rows.csv >> $S <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[0].isdigit()]
by = {}
for r in rows:
    by.setdefault(int(r[0]), {})[r[12]] = (r[13], r[14])
for i in sorted(by):
    m = by[i]
    print(i, " ".join(f"{k.split('.')[0].replace('__','_')}{'/s' if 'per_second' in k else ''}={v}{u}" for k, (u, v) in [(k, m[k]) for k in m]))
PY
done
gm() {  # v name [more]
  local v=$1 n=$2; shift 2
  [ $(el) -gt 330 ] && { echo "skip $n v$v" >> $S; return; }
  timeout 90 build-gpu/v$v/moebench gemm --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n-v$v.json > $L/gemm-$n-v$v.log 2>&1
  echo "== gemm $n v$v rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n-v$v.log | grep -v dense | awk '{printf "%s %s  ", $1, $6}')" >> $S
}
for r in 1 2; do for v in 0 1; do gm $v ds-ep2-r$r --config bench/deepseek_v3 --ep 2 --rows routed; done; done
for r in 1 2; do for v in 0 1; do gm $v qw-r$r --config bench/qwen3_30b_a3b --rows routed; done; done
for v in 0 1; do gm $v ds-ep1 --config bench/deepseek_v3 --rows routed; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
