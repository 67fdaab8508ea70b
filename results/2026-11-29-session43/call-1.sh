#!/usr/bin/env bash
# Session 43, call 1 (nvidia-h200-x2, each GPU on its own work): session 42's prepared
# next-call-1.sh and next-call-dynamic-schedule-2.sh in one call. Build A: dynamic-schedule.diff +
# gemm-totals.diff; build B: the same + session 41's grouped-dead-half.diff. GPU 0: the GPU tests
# both schedules, then the GEMMs both schedules (totals checked against rows), then Qwen3 graph
# steps. GPU 1: digests static vs dynamic vs dead half, graph checks, then the GEMMs of B against A.
set -uo pipefail
START=$(date +%s)
L=$OUT/logs; mkdir -p $L
S=$OUT/summary.txt
el() { echo $(( $(date +%s) - START )); }
read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY
echo "commit $MOE_GIT_COMMIT dirty $MOE_GIT_DIRTY" >> $S
R=results/2026-11-29-session42
git apply $R/dynamic-schedule.diff; echo "apply dynamic rc=$?" >> $S
git apply $R/gemm-totals.diff; echo "apply totals rc=$?" >> $S
rm -rf /tmp/srcB && mkdir -p /tmp/srcB && cp -a . /tmp/srcB
(cd /tmp/srcB && git apply results/2026-11-29-session41/grouped-dead-half.diff; echo "apply dead-half rc=$?") >> $S
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench moe_cuda_tests > $L/build.log 2>&1
  echo "build A rc=$? at $(el) s" >> $S ) &
( cd /tmp/srcB && cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > $L/cmake-b.log 2>&1 &&
  cmake --build build-gpu -j16 --target moebench > $L/build-b.log 2>&1
  echo "build B rc=$? at $(el) s" >> $S ) &
wait
cp build-gpu/moebench /tmp/mb-A; cp /tmp/srcB/build-gpu/moebench /tmp/mb-B

gpu0_tests() {
  for d in 1 0; do
    CUDA_VISIBLE_DEVICES=0 MOE_EXP_DYNAMIC=$d timeout 200 build-gpu/tests/moe_cuda_tests > $L/tests-dyn$d.log 2>&1
    echo "GPU0 tests MOE_EXP_DYNAMIC=$d rc=$? at $(el) s: $(grep -E '^\[  (PASSED|FAILED)' $L/tests-dyn$d.log | tr '\n' ' ')" >> $S
    grep -E '^\[  FAILED|Failure|Expected|Which is' $L/tests-dyn$d.log | head -10 >> $S
  done
}
gpu1_digests() {
  for c in qw ds mxfp8; do
    case $c in
      qw) args="--config bench/qwen3_30b_a3b";;
      ds) args="--config bench/deepseek_v3 --set tokens_per_rank=1024";;
      mxfp8) args="--config bench/mixtral_8x7b --set tokens_per_rank=1024 --set precision=fp8_tensor";;
    esac
    for v in A:1 A:0 B:1; do
      b=${v%%:*}; d=${v##*:}
      CUDA_VISIBLE_DEVICES=1 MOE_EXP_DYNAMIC=$d timeout 90 /tmp/mb-$b run --backend cuda $args --set gemm.method=grouped_sm90 --set align=16 --set check=off --set roofline=false --set warmup_s=0 --steps 2 --warmup 1 --out $L/dig-$c-$b$d.json > $L/dig-$c-$b$d.log 2>&1
      echo "GPU1 digests $c $b dynamic $d rc=$?" >> $S
    done
    python3 -c "import json,sys; d=[json.load(open(f)).get('digests') for f in sys.argv[1:]]; print('$c digests: static = dynamic', d[0]==d[1], '; dead half = dynamic', d[0]==d[2], '; any empty', any(not x for x in d))" $L/dig-$c-A1.json $L/dig-$c-A0.json $L/dig-$c-B1.json >> $S 2>&1
  done
  for b in A B; do
    CUDA_VISIBLE_DEVICES=1 MOE_EXP_DYNAMIC=1 timeout 120 /tmp/mb-$b run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set align=16 --set graph=true --set check=first --set roofline=false --steps 2 --warmup 2 > $L/check-graph-$b.log 2>&1
    echo "GPU1 check graph $b dynamic rc=$? at $(el) s: $(grep -E '^# check' $L/check-graph-$b.log)" >> $S
    CUDA_VISIBLE_DEVICES=1 MOE_EXP_DYNAMIC=1 timeout 120 /tmp/mb-$b run --backend cuda --config bench/deepseek_v3 --set tokens_per_rank=1024 --set gemm.method=grouped_sm90 --set align=16 --set check=first --set roofline=false --steps 2 --warmup 1 --set warmup_s=0 > $L/check-ds-$b.log 2>&1
    echo "GPU1 check ds 1024 $b dynamic rc=$? at $(el) s: $(grep -E '^# check' $L/check-ds-$b.log)" >> $S
  done
}
gemm_line() {  # gpu tag binary dynamic workload
  local g=$1 n=$2 b=$3 d=$4 w=$5 a
  case $w in
    qw) a="--config bench/qwen3_30b_a3b";;
    ds) a="--config bench/deepseek_v3 --ep 2";;
    mxfp8) a="--config bench/mixtral_8x7b --set precision=fp8_tensor";;
  esac
  CUDA_VISIBLE_DEVICES=$g MOE_EXP_DYNAMIC=$d timeout 60 /tmp/mb-$b gemm $a --rows routed --set align=16 --set expert_grad_dtype=bf16 --methods grouped_sm90 --iters 20 --out $L/$n.json > $L/$n.log 2>&1
  echo "GPU$g $n rc=$? at $(el) s: $(grep -E '^  (up|down|dgrad_a|dgrad_x|wgrad_out|wgrad_in) ' $L/$n.log | awk '{print $1, $6}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/$n.log)" >> $S
}
totals_check() {
  grep -E '^# totals' $L/$1.log >> $S
  python3 - $L/$1.json >> $S 2>&1 <<'PY'
import json, sys, collections
j = json.load(open(sys.argv[1]))
rows = [g for g in j['gemms'] if g['gemm'] not in ('dense', 'weights')]
bad = 0
for t in j['totals']:
    mine = [g for g in rows if (':' in g['method']) == (t['precision'] != 'bf16')]
    for m, s in t['methods'].items():
        bad += abs(s['ms'] - sum(g['median_ms'] for g in mine if g['method'] == m)) > 1e-9
    best = collections.defaultdict(lambda: 1e30)
    for g in mine: best[g['gemm']] = min(best[g['gemm']], g['median_ms'])
    bad += abs(t['fastest_each']['ms'] - sum(best.values())) > 1e-9
print('totals check against the rows:', 'ok' if bad == 0 else f'{bad} MISMATCHES')
PY
}
gpu0_gemms() {
  for r in 1 2; do for d in 1 0; do for w in qw ds mxfp8; do
    [ $(el) -gt 430 ] && return
    gemm_line 0 gemm-$w-A$d-$r A $d $w
    totals_check gemm-$w-A$d-$r
  done; done; done
}
gpu1_gemms() {
  for r in 1 2; do for v in B:1 A:1 B:0 A:0; do for w in qw ds; do
    [ $(el) -gt 430 ] && return
    b=${v%%:*}; d=${v##*:}
    gemm_line 1 gemm-$w-$b$d-$r $b $d $w
  done; done; done
}
steps() {  # gpu
  local g=$1
  for r in 1 2; do for v in A:0 A:1 B:1; do
    [ $(el) -gt 555 ] && return
    b=${v%%:*}; d=${v##*:}
    if [ $g = 0 ]; then
      CUDA_VISIBLE_DEVICES=0 MOE_EXP_DYNAMIC=$d timeout 40 /tmp/mb-$b run --backend cuda --config bench/qwen3_30b_a3b --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=3 --set roofline=false --set graph=true --steps 50 --warmup 5 > $L/qw-$b$d-$r.log 2>&1
      echo "GPU0 qw graph $b dynamic $d round $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/qw-$b$d-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/qw-$b$d-$r.log)" >> $S
    else
      CUDA_VISIBLE_DEVICES=1 MOE_EXP_DYNAMIC=$d timeout 60 /tmp/mb-$b run --backend cuda --config bench/deepseek_v3 --set gemm.method=grouped_sm90 --set expert_grad_dtype=bf16 --set align=16 --set check=off --set warmup_s=3 --set roofline=false --set graph=true --steps 20 --warmup 3 > $L/ds-$b$d-$r.log 2>&1
      echo "GPU1 ds ep1 graph $b dynamic $d round $r rc=$? at $(el) s: $(grep -E '^  (step|experts_fwd|experts_bwd) ' $L/ds-$b$d-$r.log | awk '{print $1, $2}' | tr '\n' ' ') $(grep -oE 'SM [0-9]+ MHz' $L/ds-$b$d-$r.log)" >> $S
    fi
  done; done
}
( gpu0_tests; gpu0_gemms; steps 0 ) &
( gpu1_digests; gpu1_gemms; steps 1 ) &
wait
cd $OUT && tar czf logs.tgz logs && rm -rf logs
cat $S
