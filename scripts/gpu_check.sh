#!/usr/bin/env bash
# One call on the GPU machine: build, run the GPU test suite, run the distributed step on 1..N GPUs
# with the check on, then (with --bench) a benchmark matrix. Results (JSON) and logs go to OUTDIR;
# a short table is printed last.
# usage: scripts/gpu_check.sh OUTDIR [--bench] [--agree] [--gemm-methods] [--controls] [--models]
#                             [--meshes "4x1 2x2 1x4"] [--model-tokens N] [--model-steps N]
#                             [--configs "A.json B.json"] [--run-args "--set k=v"] [--tag T]
#                             [--sweeps] [--sweep-methods L] [--deadline S]
#                             [--skip-tests] [--filter F]
# --agree: the CPU and CUDA backends on the same workloads and seeds, dumps compared tensor by
# tensor (scripts/compare_dumps.py). --controls: routing modes, capacity and align on the CUDA
# backend with the check on, dispatch allgather and alltoall_dedup (checked, and against the CPU
# backend; dedup's ep 1 digests against alltoall's), and the two references (cpu, gpu) on one
# run. --models: every
# committed model and bench workload with the check on (the GPU reference), on each mesh of
# --meshes (EPxFSDP, default 4x1), at --model-tokens tokens per rank (default: the config's), for
# --model-steps timed steps (default 5; the check follows the first). --configs LIST: only these
# workload files, for --models and --bench (default: all of configs/models, configs/bench and
# quickstart for --models; configs/bench for --bench). --run-args ARGS: added to every --models and
# --bench run (e.g. "--set expert_grad_dtype=bf16"); --tag T appends _T to those runs' names.
# --sweeps: the README's sweep example (Mixtral-8x7B, tokens per rank 2048..8192 x 1, 2, 4 GPUs as
# the machine has, each expert GEMM method of --sweep-methods LIST), its report with plots, and a
# compare of the methods. --deadline S (default 540):
# cases that would start after S seconds are skipped, so that the results still come back within
# the device's per-call limit.
# --gemm-methods: the expert GEMMs as a per-expert cuBLASLt loop
# against one cublasGemmGroupedBatchedEx call, on many-expert shapes.
set -uo pipefail
# The comment block above is the usage: --help prints it to stdout, a bad argument to stderr.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
bad_usage() { echo "gpu_check.sh: $*" >&2; usage >&2; exit 2; }
need() { [ $# -ge 2 ] || bad_usage "$1 needs a value"; }
# Arguments are parsed before anything is built or written: --help and a typo cost nothing.
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  '') bad_usage "OUTDIR is required" ;;
  -*) bad_usage "the first argument is OUTDIR, not an option ($1)" ;;
esac
FINAL=$1
shift
BENCH=0 SKIP_TESTS=0 FILTER='*' AGREE=0 GEMM_METHODS=0 CONTROLS=0 MODELS=0 MESHES="4x1"
MODEL_TOKENS="" MODEL_STEPS=5 CONFIGS="" RUN_ARGS="" TAG="" SWEEPS=0 SWEEP_METHODS="lt_multistream grouped_batched" DEADLINE=540
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --bench) BENCH=1 ;;
    --agree) AGREE=1 ;;
    --gemm-methods) GEMM_METHODS=1 ;;
    --controls) CONTROLS=1 ;;
    --models) MODELS=1 ;;
    --meshes) need "$@"; MESHES=$2; shift ;;
    --model-tokens) need "$@"; MODEL_TOKENS=$2; shift ;;
    --model-steps) need "$@"; MODEL_STEPS=$2; shift ;;
    --configs) need "$@"; CONFIGS=$2; shift ;;
    --run-args) need "$@"; RUN_ARGS=$2; shift ;;
    --tag) need "$@"; TAG=_$2; shift ;;
    --sweeps) SWEEPS=1 ;;
    --sweep-methods) need "$@"; SWEEP_METHODS=$2; shift ;;
    --deadline) need "$@"; DEADLINE=$2; shift ;;
    --skip-tests) SKIP_TESTS=1 ;;
    --filter) need "$@"; FILTER=$2; shift ;;
    *) bad_usage "unknown option $1" ;;
  esac
  shift
done
cd "$(dirname "$0")/.."
for c in $CONFIGS; do
  [ -f "$c" ] || { echo "--configs: no workload file '$c' (paths from the repository root)" >&2; exit 2; }
done
case $MODEL_STEPS in ''|*[!0-9]*) echo "--model-steps: '$MODEL_STEPS' is not a step count" >&2; exit 2 ;; esac
case $DEADLINE in ''|*[!0-9]*) echo "--deadline: '$DEADLINE' is not a number of seconds" >&2; exit 2 ;; esac
# Everything is written under a work folder and packed into OUTDIR/gpu_check.tgz at the end (the
# device tool returns few files); summary.txt and the result JSON stay beside it.
OUTDIR=$(mktemp -d)/gpu_check
mkdir -p "$OUTDIR"
# Provenance: BUILD_COMMIT holds "<sha> <dirty 0|1>", written beside the tree by whoever sent it
# (see README, "GPU machine"); it wins over any git metadata the copy has, which can be older.
if [ -f BUILD_COMMIT ]; then
  read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT
  export MOE_GIT_COMMIT MOE_GIT_DIRTY
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on the shared hosts (../shared/GPU.md)
SUMMARY="$OUTDIR/summary.txt"
: > "$SUMMARY"
mkdir -p "$FINAL"
# summary.txt is copied to OUTDIR after every line, so that a call cut short still returns it.
note() { echo "$*" | tee -a "$SUMMARY"; cp "$SUMMARY" "$FINAL/"; }

nvidia-smi -L > "$OUTDIR/gpus.txt" 2>&1
NGPU=$(grep -c '^GPU' "$OUTDIR/gpus.txt")
note "gpus: $NGPU ($(head -1 "$OUTDIR/gpus.txt"))"

GEN=""
command -v ninja >/dev/null && GEN="-G Ninja"
if ! cmake -S . -B build-gpu $GEN -DCMAKE_BUILD_TYPE=Release > "$OUTDIR/cmake.log" 2>&1 ||
   ! cmake --build build-gpu -j "$(nproc)" > "$OUTDIR/build.log" 2>&1; then
  tail -40 "$OUTDIR/cmake.log" "$OUTDIR/build.log"
  note "build: FAIL"
  exit 1
fi
note "build: ok"
BIN=build-gpu/moebench

run_case() {  # run_case NAME NP ARGS... -> result JSON in OUTDIR/NAME.json, log in NAME.log
  local name=$1 np=$2; shift 2
  if [ "$np" -gt "$NGPU" ]; then note "$name: skipped (needs $np GPUs)"; return; fi
  if [ $SECONDS -gt "$DEADLINE" ]; then note "$name: skipped (past --deadline $DEADLINE s)"; return; fi
  local t0=$SECONDS
  timeout 900 mpirun --oversubscribe -np "$np" "$BIN" run --backend cuda -q \
    --out "$OUTDIR/$name.json" "$@" > "$OUTDIR/$name.log" 2>&1
  local rc=$?
  local step check
  step=$(grep -E '^  step ' "$OUTDIR/$name.log" | awk '{print $2}')
  check=$(grep -E '^# check:' "$OUTDIR/$name.log" | sed 's/# check: //')
  # A median from steps whose clocks were still changing is flagged where it is listed.
  local drift=""
  grep -q '^# warning: the timed steps drift' "$OUTDIR/$name.log" && drift=" timed steps drift"
  note "$(printf '%-40s rc=%-3s step_ms=%-10s check=%-14s (%ds)%s' "$name" "$rc" "${step:-?}" \
    "${check:-?}" $((SECONDS - t0)) "$drift")"
  [ $rc -eq 0 ] || tail -20 "$OUTDIR/$name.log"
}

if [ $SKIP_TESTS -eq 0 ]; then
  build-gpu/tests/moe_cuda_tests --gtest_filter="$FILTER" > "$OUTDIR/gpu_tests.log" 2>&1
  rc=$?
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUTDIR/gpu_tests.log" | head -40
  note "gpu unit tests: rc=$rc, $(grep -E '^\[==========\]' "$OUTDIR/gpu_tests.log" | tail -1)"

  TINY=configs/tiny.json
  SIG="--set router.score=sigmoid --set router.groups=4 --set router.group_topk=2 \
--set router.normalize_topk=true --set router.scaling=2.5 --set router.expert_bias=true"
  LOSS="--set router.aux_coeff=0.01 --set router.z_coeff=0.001"
  run_case gpu_np1_tiny 1 --config $TINY
  run_case gpu_np1_tiny_fp32 1 --config $TINY --set dtype=fp32 $SIG $LOSS
  run_case gpu_np1_tiny_bf16_grads 1 --config $TINY $SIG --set expert_grad_dtype=bf16
  run_case gpu_np2_ep2 2 --config $TINY --set mesh.ep=2 $LOSS
  run_case gpu_np2_fsdp2 2 --config $TINY --set mesh.ep=1 --set mesh.fsdp=2 $SIG
  # bf16 expert gradients: bf16 wgrad GEMM outputs and a bf16 NCCL reduce-scatter, checked.
  run_case gpu_np2_fsdp2_bf16_grads 2 --config $TINY --set mesh.ep=1 --set mesh.fsdp=2 $SIG \
    --set expert_grad_dtype=bf16
  [ -f "$OUTDIR/gpu_np2_fsdp2_bf16_grads.json" ] &&
    note "bf16 grads: reduce-scatter bytes bf16/fp32 = $(python3 -c "import json, sys
b, f = (json.load(open(p))['timing']['phases']['grad_sync']['bytes_per_rank'] for p in sys.argv[1:])
print(b / f, '(want 0.5)')" "$OUTDIR/gpu_np2_fsdp2_bf16_grads.json" "$OUTDIR/gpu_np2_fsdp2.json" 2>&1)"
  # The same seed twice: the digests (computed on the GPUs) must be equal.
  run_case gpu_np2_fsdp2_again 2 --config $TINY --set mesh.ep=1 --set mesh.fsdp=2 $SIG
  [ -f "$OUTDIR/gpu_np2_fsdp2_again.json" ] && note "repeat np2 fsdp2: $("$BIN" compare "$OUTDIR/gpu_np2_fsdp2.json" \
    "$OUTDIR/gpu_np2_fsdp2_again.json" 2>&1 | grep '^# digests')"
  for mesh in "4 1" "2 2" "1 4"; do
    set -- $mesh
    run_case "gpu_np4_ep$1_fsdp$2_softmax" 4 --config $TINY --set mesh.ep=$1 --set mesh.fsdp=$2 $LOSS
    run_case "gpu_np4_ep$1_fsdp$2_sigmoid" 4 --config $TINY --set mesh.ep=$1 --set mesh.fsdp=$2 $SIG
    run_case "gpu_np4_ep$1_fsdp$2_bf16_grads" 4 --config $TINY --set mesh.ep=$1 \
      --set mesh.fsdp=$2 $LOSS --set expert_grad_dtype=bf16
  done
  # The backward all-to-all beside the weight-gradient GEMMs (overlap key): checked, with the
  # digests of the plain schedule.
  OV="--set overlap=dispatch_bwd"
  run_case gpu_np1_tiny_overlap 1 --config $TINY $OV
  run_case gpu_np2_ep2_overlap 2 --config $TINY --set mesh.ep=2 $LOSS $OV
  run_case gpu_np4_ep4_fsdp1_softmax_overlap 4 --config $TINY --set mesh.ep=4 --set mesh.fsdp=1 $LOSS $OV
  for c in gpu_np1_tiny gpu_np2_ep2 gpu_np4_ep4_fsdp1_softmax; do
    [ -f "$OUTDIR/${c}_overlap.json" ] || continue
    note "overlap $c vs plain: $("$BIN" compare "$OUTDIR/$c.json" "$OUTDIR/${c}_overlap.json" 2>&1 |
      grep '^# digests')"
  done
  # The pipeline (overlap=pipeline): chunks whose dispatcher directions run on the side stream
  # beside another chunk's GEMMs, checked with both dispatchers, shared experts and each GEMM
  # method (grouped_sm90 stores only: the later chunks' weight gradients accumulate on the
  # cuBLASLt loop); one chunk must give the plain schedule's digests; each run's lanes line.
  PL="--set overlap=pipeline"
  run_case gpu_np1_tiny_pipeline1 1 --config $TINY $PL --set overlap_chunks=1
  run_case gpu_np2_ep2_pipeline1 2 --config $TINY --set mesh.ep=2 $LOSS $PL --set overlap_chunks=1
  run_case gpu_np2_ep2_pipeline4 2 --config $TINY --set mesh.ep=2 $LOSS $PL --set overlap_chunks=4
  for m in lt_multistream grouped_batched grouped_sm90; do
    run_case "gpu_np1_tiny_pipeline4_$m" 1 --config $TINY $SIG $PL --set overlap_chunks=4 \
      --set gemm.method=$m
  done
  run_case gpu_np4_ep4_pipeline2_shared 4 --config $TINY --set mesh.ep=4 $LOSS $PL \
    --set model.shared_experts=1 --set model.shared_ffn=48
  run_case gpu_np4_ep2_fsdp2_pipeline4_allgather 4 --config $TINY --set mesh.ep=2 --set mesh.fsdp=2 \
    $SIG $PL --set overlap_chunks=4 --set dispatch=allgather
  for c in gpu_np1_tiny gpu_np2_ep2; do
    [ -f "$OUTDIR/${c}_pipeline1.json" ] || continue
    note "pipeline1 $c vs plain: $("$BIN" compare "$OUTDIR/$c.json" "$OUTDIR/${c}_pipeline1.json" 2>&1 |
      grep '^# digests')"
  done
  # Where an all-to-all has GEMMs to hide behind: the lanes of none, dispatch_bwd and the
  # pipeline at 2 and 4 chunks, Qwen3-30B-A3B's layer at ep 2 (timings; the check off, as the
  # bench workloads ship).
  for ov in "none" "dispatch_bwd" "pipeline --set overlap_chunks=2" "pipeline --set overlap_chunks=4"; do
    tag=$(echo "$ov" | tr -cd 'a-z0-9_')
    run_case "gpu_np2_qwen3_$tag" 2 --config configs/bench/qwen3_30b_a3b.json --set mesh.ep=2 \
      --set tokens_per_rank=4096 --set overlap=$ov
    grep -sh '^# lanes' "$OUTDIR/gpu_np2_qwen3_$tag.log" | sed "s/^/$tag: /" | tee -a "$SUMMARY"
  done
  # A medium shape the float64 reference still checks in seconds.
  run_case gpu_np4_medium 4 --config configs/quickstart.json --set mesh.ep=4 \
    --set tokens_per_rank=512 --set model.experts=16 --set model.topk=4 $SIG $LOSS --set check=every --steps 3
  # A rank that throws, or dies outright, mid-run under NCCL: the job must end non-zero within
  # about --timeout-s (no rank waits forever in a collective).
  if [ "$NGPU" -ge 2 ]; then
    for how in throw exit; do
      t0=$SECONDS
      MOE_FAULT=1:4:$how timeout 120 mpirun --oversubscribe -np 2 "$BIN" run --backend cuda -q \
        --config $TINY --set mesh.ep=2 --steps 10 --timeout-s 20 > "$OUTDIR/fault_$how.log" 2>&1
      note "$(printf '%-40s rc=%-3s after %ds (want rc != 0 and about 20 s or less)' \
        "fault_np2_rank1_$how" "$?" $((SECONDS - t0)))"
    done
  fi
  run_case gpu_np1_dump 1 --config $TINY --dump "$OUTDIR/dump_np1"
  if [ "$NGPU" -ge 2 ]; then
    run_case gpu_np2_dump 2 --config $TINY --set mesh.ep=2 $SIG $LOSS --dump "$OUTDIR/dump_np2"
    python3 scripts/verify_dump.py "$OUTDIR/dump_np2" > "$OUTDIR/verify_dump_np2.log" 2>&1
    note "verify_dump np2 (independent numpy float64): rc=$? $(tail -1 "$OUTDIR/verify_dump_np2.log")"
  fi
fi

SIGG="--set router.score=sigmoid --set router.groups=4 --set router.group_topk=2 \
--set router.normalize_topk=true --set router.scaling=2.5 --set router.expert_bias=true"
agree() {  # agree NAME NP ARGS...: the same run on both backends, dumps compared
  local name=$1 np=$2; shift 2
  [ "$np" -le "$NGPU" ] || { note "$name: skipped (needs $np GPUs)"; return; }
  for be in cpu cuda; do
    timeout 900 mpirun --oversubscribe -np "$np" "$BIN" run --backend $be -q "$@" \
      --dump "$OUTDIR/agree_${name}_$be" > "$OUTDIR/agree_${name}_$be.log" 2>&1
  done
  python3 scripts/compare_dumps.py "$OUTDIR/agree_${name}_cpu" "$OUTDIR/agree_${name}_cuda" \
    > "$OUTDIR/agree_$name.log" 2>&1
  note "$(printf '%-40s rc=%-3s %s' "agree_$name" "$?" "$(tail -1 "$OUTDIR/agree_$name.log")")"
}

if [ $CONTROLS -eq 1 ]; then
  TINY=configs/tiny.json
  for mode in uniform balanced "powerlaw --set routing.skew=1.5" "hot --set routing.hot_fraction=0.6"; do
    run_case "ctl_np4_routing_${mode%% *}" 4 --config $TINY --set mesh.ep=4 --set routing.mode=$mode
  done
  run_case ctl_np4_capacity_prob_2x2_sigmoid 4 --config $TINY --set mesh.ep=2 --set mesh.fsdp=2 \
    $SIGG --set capacity_factor=1.0
  run_case ctl_np4_capacity_position_hot 4 --config $TINY --set mesh.ep=4 --set capacity_factor=1.0 \
    --set drop_policy=position --set routing.mode=hot
  run_case ctl_np4_align16_capacity_powerlaw 4 --config $TINY --set mesh.ep=4 --set align=16 \
    --set capacity_factor=1.0 --set routing.mode=powerlaw
  run_case ctl_np4_align128_quickstart 4 --config configs/quickstart.json --set mesh.ep=4 --set align=128
  # Both references on one medium run: each must pass, and the report names which ran.
  for ref in gpu cpu; do
    run_case "ctl_np4_medium_reference_$ref" 4 --config configs/quickstart.json --set mesh.ep=4 \
      --set tokens_per_rank=512 --set model.experts=16 --set model.topk=4 $SIGG \
      --set capacity_factor=1.25 --set reference=$ref --steps 2 --warmup 1
    grep -sh '^# correctness' "$OUTDIR/ctl_np4_medium_reference_$ref.log" | tee -a "$SUMMARY"
  done
  agree tiny_capacity_align 2 --config $TINY --set mesh.ep=2 $SIGG --set capacity_factor=1.0 \
    --set align=16 --set routing.mode=powerlaw
  # dispatch allgather: at ep 1 (no collective) and over NCCL's all-gathers and reduce-scatters.
  AG="--set dispatch=allgather --set capacity_factor=1.0 --set align=16 --set model.topk=4"
  run_case ctl_np1_allgather_capacity_align 1 --config $TINY $AG $SIGG --set check=every --steps 3
  run_case ctl_np4_allgather_capacity_align 4 --config $TINY --set mesh.ep=4 $AG $SIGG
  run_case ctl_np4_allgather_2x2_overlap 4 --config configs/quickstart.json --set mesh.ep=2 \
    --set mesh.fsdp=2 $AG --set overlap=dispatch_bwd
  # The pipeline's capacity applies per chunk, on the GPU as in the reference.
  run_case ctl_np4_pipeline4_capacity_prob_2x2 4 --config $TINY --set mesh.ep=2 --set mesh.fsdp=2 \
    $SIGG --set capacity_factor=1.0 --set overlap=pipeline --set overlap_chunks=4
  run_case ctl_np4_pipeline2_allgather_capacity_align 4 --config $TINY --set mesh.ep=4 $AG $SIGG \
    --set overlap=pipeline
  agree tiny_pipeline4_ep2 2 --config $TINY --set mesh.ep=2 $SIGG --set overlap=pipeline \
    --set overlap_chunks=4 --set align=16
  agree tiny_allgather_np1 1 --config $TINY $AG $SIGG
  agree tiny_allgather_ep2 2 --config $TINY --set mesh.ep=2 $AG --set routing.mode=powerlaw
  # dispatch alltoall_dedup: at ep 1 (alltoall's step: the digests must be alltoall's), over
  # NCCL's all-to-alls at ep 4 and 2x2 with the overlap, and against the CPU backend at ep 1 and 2.
  DD="--set capacity_factor=1.0 --set align=16 --set model.topk=4"
  run_case ctl_np1_dedup_capacity_align 1 --config $TINY $DD --set dispatch=alltoall_dedup $SIGG \
    --set check=every --steps 3
  run_case ctl_np1_alltoall_capacity_align 1 --config $TINY $DD $SIGG --set check=every --steps 3
  if [ -f "$OUTDIR/ctl_np1_dedup_capacity_align.json" ]; then
    note "dedup ep 1 vs alltoall: $("$BIN" compare "$OUTDIR/ctl_np1_alltoall_capacity_align.json" \
      "$OUTDIR/ctl_np1_dedup_capacity_align.json" --allow-different-work 2>&1 | grep '^# digests')"
  fi
  DD="$DD --set dispatch=alltoall_dedup"
  run_case ctl_np4_dedup_capacity_align 4 --config $TINY --set mesh.ep=4 $DD $SIGG
  run_case ctl_np4_dedup_2x2_overlap 4 --config configs/quickstart.json --set mesh.ep=2 \
    --set mesh.fsdp=2 $DD --set overlap=dispatch_bwd
  agree tiny_dedup_np1 1 --config $TINY $DD $SIGG
  agree tiny_dedup_ep2 2 --config $TINY --set mesh.ep=2 $DD --set routing.mode=powerlaw
fi

if [ $MODELS -eq 1 ]; then
  TOK=""
  [ -n "$MODEL_TOKENS" ] && TOK="--set tokens_per_rank=$MODEL_TOKENS"
  for mesh in $MESHES; do
    ep=${mesh%x*} fsdp=${mesh#*x}
    for cfg in ${CONFIGS:-configs/models/*.json configs/bench/*.json configs/quickstart.json}; do
      name=$(basename "$cfg" .json)
      [ "$cfg" = "configs/bench/$name.json" ] && name="bench_$name"
      run_case "model_${name}_ep${ep}_fsdp${fsdp}$TAG" $((ep * fsdp)) --config "$cfg" \
        --set mesh.ep=$ep --set mesh.fsdp=$fsdp --set check=first $TOK --steps "$MODEL_STEPS" \
        --warmup 2 $RUN_ARGS
      grep -sh '^# correctness' "$OUTDIR/model_${name}_ep${ep}_fsdp${fsdp}$TAG.log" | tee -a "$SUMMARY"
    done
  done
fi

if [ $SWEEPS -eq 1 ] && [ $SECONDS -le "$DEADLINE" ]; then
  # The README's example: a sweep per variant (tokens per rank x the GPUs this machine has), one
  # report over both, a compare of the two at the most GPUs and 4096 tokens per rank.
  SW=$OUTDIR/sweeps NPS="" NMAX=1
  for np in 1 2 4 8; do
    [ "$np" -le "$NGPU" ] && NPS=${NPS:+$NPS,}$np && NMAX=$np
  done
  for m in $SWEEP_METHODS; do
    scripts/sweep.sh --name mixtral_8x7b_$m --config configs/bench/mixtral_8x7b.json \
      --axis np=$NPS --axis tokens_per_rank=2048,4096,8192 --set mesh.fsdp=1 --set check=first \
      --set gemm.method=$m \
      --bin "$BIN" --out "$SW" --backend cuda --timeout 120 > "$OUTDIR/sweep_$m.log" 2>&1
    note "sweep mixtral_8x7b_$m: rc=$? ($(tail -1 "$OUTDIR/sweep_$m.log"))"
    tar czf "$FINAL/sweeps.tgz" -C "$OUTDIR" sweeps  # after each, in case the call is cut short
  done
  python3 scripts/report.py "$SW"/*/* --x tokens_per_rank --out "$SW/report" > "$OUTDIR/report.log" 2>&1
  note "report: rc=$? ($SW/report)"
  set -- "$SW"/*/*/"np=$NMAX,tokens_per_rank=4096.json"
  if [ $# -ge 2 ]; then
    "$BIN" compare "$@" > "$SW/compare.txt" 2>&1
    note "compare np=$NMAX tokens_per_rank=4096 ($SWEEP_METHODS): rc=$?"
  fi
  tar czf "$FINAL/sweeps.tgz" -C "$OUTDIR" sweeps
fi

if [ $AGREE -eq 1 ]; then
  agree tiny_softmax 1 --config configs/tiny.json --set router.aux_coeff=0.01 --set router.z_coeff=0.001
  agree tiny_sigmoid_fp32 1 --config configs/tiny.json --set dtype=fp32 $SIGG
  agree quickstart_sigmoid 1 --config configs/quickstart.json --set model.experts=16 \
    --set model.topk=4 $SIGG --steps 1 --warmup 1
  agree quickstart_ep2 2 --config configs/quickstart.json --set mesh.ep=2 --steps 1 --warmup 1
fi

if [ $GEMM_METHODS -eq 1 ]; then
  # Many small experts, where one grouped call could beat a launch per expert.
  for shape in "qwen3_30b_a3b 2048 768 128 8" "deepseek_v3_ep8 7168 2048 32 8"; do
    set -- $shape
    for method in lt_multistream grouped_batched; do
      run_case "gemm_$1_$method" 1 --config configs/bench/mixtral_8x7b.json \
        --set gemm.method=$method --set name=$1 --set model.hidden=$2 --set model.ffn=$3 --set model.experts=$4 \
        --set model.topk=$5 --set router.softmax_after_topk=false
    done
  done
fi

if [ $BENCH -eq 1 ]; then
  for cfg in ${CONFIGS:-configs/bench/*.json}; do
    name=$(basename "$cfg" .json)
    for np in 1 2 4 8; do
      [ "$np" -le "$NGPU" ] || continue
      run_case "bench_${name}_np$np$TAG" "$np" --config "$cfg" --set mesh.ep=$np --set mesh.fsdp=1 \
        $RUN_ARGS
    done
  done
fi
mkdir -p "$FINAL"
tar czf "$FINAL/gpu_check.tgz" -C "$(dirname "$OUTDIR")" gpu_check
cp "$SUMMARY" "$FINAL/"
echo "=== failures (gpu unit tests) ==="
grep -B2 -A12 'Failure' "$OUTDIR/gpu_tests.log" 2>/dev/null | head -60
echo "=== summary ==="
cat "$SUMMARY"
