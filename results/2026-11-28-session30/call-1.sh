#!/usr/bin/env bash
# Session 30, call 1: session 29's commits never run on a GPU (054982d, 713787d, c6c30a3, a7c1e73):
# a checked run's provenance, moebench gemm --rows routed twice and compare, gemm's validation.
# Then: clusters of 2 on routed rows; ncu sections on the up projection (bf16, fp8_tensor,
# fp8_block) at DeepSeek-V3 EP 2; and, on two GPUs, the bench steps.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
[ -f BUILD_COMMIT ] && { read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; }
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader >> $S
NG=$(nvidia-smi -L | wc -l)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j30 --target moebench > $L/build.log 2>&1
echo "build rc=$? at $(el) s" >> $S
B=build-gpu/moebench
export CUDA_VISIBLE_DEVICES=0
# (1) the unrun commits
timeout 120 $B run --config bench/qwen3_30b_a3b --backend cuda --set check=first --steps 2 --out $L/r.json > $L/r.log 2>&1
echo "== run qwen3 check rc=$? at $(el) s: $(grep -E '^# check' $L/r.log)" >> $S
python3 -c "
import json; d=json.load(open('$L/r.json')); print('provenance', json.dumps(d['provenance'])[:600])" >> $S 2>&1
for i in 1 2; do
  timeout 90 $B gemm --config bench/deepseek_v3 --ep 2 --methods grouped_sm90 --rows routed --set align=16 --out $L/g$i.json > $L/g$i.log 2>&1
  echo "== gemm routed $i rc=$? at $(el) s" >> $S
done
python3 -c "
import json
for i in (1,2):
    d=json.load(open('$L/g%d.json'%i)); r=d['rows']
    print('g%d'%i, d['command'], d['config'], d['rows_from'], d['routing_mode'], 'ep_rank', d['ep_rank'], 'rows', min(r), max(r), sum(r)/len(r), 'provenance keys', sorted(d['provenance'])[:8])" >> $S 2>&1
$B compare $L/g1.json $L/g2.json > $L/compare.log 2>&1
echo "== compare rc=$?" >> $S; head -30 $L/compare.log >> $S
timeout 30 $B gemm --config tiny --set model.topk=99 > $L/topk.log 2>&1
echo "== gemm topk=99 rc=$? (want 2): $(head -c 400 $L/topk.log)" >> $S
# (2) clusters of 2 on routed rows, alternating
gm() {  # name [more]
  local n=$1; shift
  timeout 90 $B gemm --config bench/deepseek_v3 --ep 2 --methods grouped_sm90 --iters 20 --set align=16 --set expert_grad_dtype=bf16 "$@" --out $L/gemm-$n.json > $L/gemm-$n.log 2>&1
  echo "== gemm $n rc=$? at $(el) s: $(grep -E '^  [a-z]' $L/gemm-$n.log | grep -v dense | awk '{printf "%s %s  ", $1, $6}')" >> $S
}
for r in 1 2; do for c in 1 2; do gm routed-c$c-r$r --rows routed --set gemm.sm90_cluster=$c; done; done
# (3) ncu sections on the up projection's third launch (balanced rows, iters 1)
for p in bf16 fp8_tensor fp8_block; do
  [ $(el) -gt 330 ] && { echo "skip ncu $p" >> $S; continue; }
  timeout 120 /usr/local/cuda/bin/ncu --clock-control none --kernel-name regex:grouped_gemm_kernel --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section ComputeWorkloadAnalysis --section Occupancy \
    $B gemm --config bench/deepseek_v3 --ep 2 --methods grouped_sm90 --iters 1 --set align=16 --set expert_grad_dtype=bf16 --set precision=$p > $L/ncu-up-$p.txt 2> $L/ncu-up-$p.err
  echo "== ncu up $p rc=$? at $(el) s" >> $S
  grep -E 'Duration|Throughput|Shared Memory|Stall|Pipe|Issued|Eligible|L1/TEX Hit|L2 Hit|Bank' $L/ncu-up-$p.txt | head -60 >> $S
done
unset CUDA_VISIBLE_DEVICES
# (4) steps, two GPUs only
row() { python3 -c "
import json;d=json.load(open('$1'));t=d['timing'];p=t['phases']
print('step', round(t['step']['median'],3), 'TFLOP/s', round(d['throughput']['tflops_per_rank'],1), 'experts', round(p['experts_fwd']['median'],3), round(p['experts_bwd']['median'],3), 'clocks', [round(r['sm_mhz']['median']) for r in t['clocks']['ranks']])" 2>&1 | tail -1; }
go() {  # np name config [more]
  local np=$1 n=$2 cfg=$3; shift 3
  [ $(el) -gt 520 ] && { echo "skip $n" >> $S; return; }
  timeout 120 mpirun --allow-run-as-root -np $np -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY \
    $B run --config $cfg --backend cuda --set expert_grad_dtype=bf16 --set roofline=false --set align=16 \
    --set check=off --steps 20 --warmup 8 "$@" --out $L/$n.json > $L/$n.log 2>&1
  echo "== $n rc=$? at $(el) s: $(row $L/$n.json)" >> $S
  grep -E '^# (expert GEMMs|warning)' $L/$n.log >> $S
}
if [ "$NG" -ge 2 ]; then
  go 2 ds-ep2 bench/deepseek_v3 --set mesh.ep=2 --set dispatch=nvlink --set gemm.method=grouped_sm90
  go 2 ds-ep2-fp8b bench/deepseek_v3 --set mesh.ep=2 --set dispatch=nvlink --set gemm.method=grouped_sm90 --set precision=fp8_block --set fp8_weights=cached
  go 2 mx-ep2 bench/mixtral_8x7b --set mesh.ep=2 --set dispatch=nvlink --set tokens_per_rank=8192 --set gemm.method=lt_multistream
  go 2 mx-ep2-fp8t bench/mixtral_8x7b --set mesh.ep=2 --set dispatch=nvlink --set tokens_per_rank=8192 --set gemm.method=lt_multistream --set precision=fp8_tensor --set fp8_weights=cached
  go 2 qw-ep2-graph bench/qwen3_30b_a3b --set mesh.ep=2 --set dispatch=nvlink --set gemm.method=grouped_sm90 --set graph=true
fi
go 1 qw-ep1-graph bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set graph=true
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
