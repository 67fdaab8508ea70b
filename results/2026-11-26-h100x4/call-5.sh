#!/usr/bin/env bash
# Session 18, call 5: on call 4's warm machine (its build kept), DeepSeek-V3 at 8192 tokens per
# rank, EP 4, grouped_sm90, dedup: none against the pipeline (2 chunks) with and without
# gemm.sm90_ctas 116. Run as one command line; written out here as it ran.
B=build-gpu/moebench; read -r MOE_GIT_COMMIT MOE_GIT_DIRTY < BUILD_COMMIT; export MOE_GIT_COMMIT MOE_GIT_DIRTY; mkdir -p $OUT/logs
for v in "none|" "pipe2_ctas116|--set overlap=pipeline --set gemm.sm90_ctas=116" "pipe2|--set overlap=pipeline"; do
  n=${v%%|*}; a=${v#*|}
  timeout 80 mpirun --allow-run-as-root -np 4 -x NCCL_NVLS_ENABLE=0 -x MOE_GIT_COMMIT -x MOE_GIT_DIRTY $B run --config configs/bench/deepseek_v3.json --set tokens_per_rank=8192 --set mesh.ep=4 --set align=16 --set expert_grad_dtype=bf16 --set check=off --steps 20 --warmup 8 --set gemm.method=grouped_sm90 --set dispatch=alltoall_dedup $a --backend cuda --out $OUT/logs/F_deepseek8k_$n.json > $OUT/logs/F_deepseek8k_$n.log 2>&1
  echo "== F_deepseek8k_$n rc=$?"; grep -E '^# lanes|^  (step|experts_fwd|experts_bwd) ' $OUT/logs/F_deepseek8k_$n.log | cut -c1-150
done
