# Distributed runs under mpirun. Each case runs the whole step with the check on and passes only if
# the check passes (moebench exits non-zero otherwise). Labels: mpi.
set(MOE_TINY ${CMAKE_SOURCE_DIR}/configs/tiny.json)
set(MOE_MPIRUN ${MPIEXEC_EXECUTABLE} --oversubscribe ${MPIEXEC_NUMPROC_FLAG})

# Each case gets its own Open MPI session-directory root: jobs that start and end together under
# ctest -j otherwise race on /tmp/ompi.<host>.<uid> (one removes it as another creates it).
function(moe_mpi_test_env test)
  set(dir ${CMAKE_BINARY_DIR}/mpi_session/${test})
  file(MAKE_DIRECTORY ${dir})
  set_tests_properties(${test} PROPERTIES ENVIRONMENT
                                          "${MOE_MPI_ENV};OMPI_MCA_orte_tmpdir_base=${dir}")
endfunction()

# moe_mpi_case(NAME NP ARGS...): mpirun -np NP moebench run --config tiny ARGS
function(moe_mpi_case name np)
  add_test(NAME mpi.${name}
           COMMAND ${MOE_MPIRUN} ${np} $<TARGET_FILE:moebench> run --config ${MOE_TINY} -q ${ARGN})
  set_tests_properties(mpi.${name} PROPERTIES LABELS mpi TIMEOUT 300)
  moe_mpi_test_env(mpi.${name})
endfunction()

set(MOE_SIGMOID_GROUPS --set router.score=sigmoid --set router.groups=4 --set router.group_topk=2
    --set router.normalize_topk=true --set router.scaling=2.5 --set router.expert_bias=true)
set(MOE_LOSSES --set router.aux_coeff=0.01 --set router.z_coeff=0.001)

moe_mpi_case(np1 1)
moe_mpi_case(np2_ep2 2 --set mesh.ep=2 --set mesh.fsdp=1)
moe_mpi_case(np2_fsdp2 2 --set mesh.ep=1 --set mesh.fsdp=2)
foreach(mesh "4;1" "2;2" "1;4")
  list(GET mesh 0 ep)
  list(GET mesh 1 fsdp)
  set(m --set mesh.ep=${ep} --set mesh.fsdp=${fsdp})
  moe_mpi_case(np4_ep${ep}_fsdp${fsdp}_softmax 4 ${m})
  moe_mpi_case(np4_ep${ep}_fsdp${fsdp}_sigmoid_groups 4 ${m} ${MOE_SIGMOID_GROUPS})
  moe_mpi_case(np4_ep${ep}_fsdp${fsdp}_aux_z 4 ${m} ${MOE_LOSSES})
endforeach()
# One expert per EP rank, split over 2 FSDP ranks: one of each pair checks no expert's gradients.
moe_mpi_case(np8_ep4_fsdp2_one_expert_per_rank 8 --set mesh.ep=4 --set mesh.fsdp=2
             --set model.experts=4 --set expert_placement=balanced)
moe_mpi_case(np4_mixtral_style 4 --set mesh.ep=4 --set router.softmax_after_topk=true
             --set router.normalize_topk=true)
# One expert a token, normalized (Switch-style top-1): p is the scaling, the router's gradient 0
# exactly on both sides (the reference once left rounding noise there and failed dw_gate).
moe_mpi_case(np2_top1_normalized 2 --set mesh.ep=2 --set model.topk=1
             --set router.normalize_topk=true --set router.scaling=2.5)
moe_mpi_case(np4_fp32 4 --set mesh.ep=2 --set dtype=fp32 ${MOE_SIGMOID_GROUPS} ${MOE_LOSSES})
moe_mpi_case(np4_every_step 4 --set mesh.ep=4 --set check=every --steps 3)
# Skewed sizes: more experts than tokens, so some experts (and maybe whole ranks) get nothing.
moe_mpi_case(np4_sparse_tokens 4 --set mesh.ep=4 --set tokens_per_rank=3 --set model.experts=16
             --set model.topk=4)
# 8 ranks: the EP=8 and EP=4 x FSDP=2 meshes of the DeepSeek-V3 issue, on a small shape.
moe_mpi_case(np8_ep8_sigmoid_groups 8 --set mesh.ep=8 --set mesh.fsdp=1 ${MOE_SIGMOID_GROUPS})
moe_mpi_case(np8_ep4_fsdp2_sigmoid_groups 8 --set mesh.ep=4 --set mesh.fsdp=2
             ${MOE_SIGMOID_GROUPS})
# And the Mixtral-8x7B run of that issue (E 8, K 2, softmax after top-k) at EP=8: one expert a rank.
moe_mpi_case(np8_ep8_mixtral_style 8 --set mesh.ep=8 --set mesh.fsdp=1
             --set router.softmax_after_topk=true)

# Routing controls (CPU backend): forced modes, capacity drops by both policies, align padding;
# the reference applies the same drops, so the check must pass.
foreach(mode uniform balanced powerlaw hot)
  moe_mpi_case(np4_routing_${mode} 4 --set mesh.ep=4 --set routing.mode=${mode} ${MOE_LOSSES})
endforeach()
moe_mpi_case(np4_capacity_probability 4 --set mesh.ep=2 --set mesh.fsdp=2 --set capacity_factor=1.0
             ${MOE_SIGMOID_GROUPS} ${MOE_LOSSES})
moe_mpi_case(np4_capacity_position_hot 4 --set mesh.ep=4 --set capacity_factor=0.75
             --set drop_policy=position --set routing.mode=hot)
moe_mpi_case(np4_align16_capacity 4 --set mesh.ep=4 --set align=16 --set capacity_factor=1.25
             --set routing.mode=powerlaw)

# bf16 expert gradients with FSDP (bf16 reduce-scatter), capacity drops and align padding.
moe_mpi_case(np4_bf16_grads_capacity_align 4 --set mesh.ep=2 --set mesh.fsdp=2
             --set expert_grad_dtype=bf16 --set capacity_factor=1.0 --set align=8
             ${MOE_SIGMOID_GROUPS} ${MOE_LOSSES})
moe_mpi_case(np8_ep4_fsdp2_bf16_grads 8 --set mesh.ep=4 --set mesh.fsdp=2 --set expert_grad_dtype=bf16
             ${MOE_SIGMOID_GROUPS})

# moe_dispatch_mesh_cases(DISPATCH NP:EP:FSDP ...): the step with dispatch DISPATCH on each mesh,
# K 4 and sigmoid group-limited routing with both losses; cases np<NP>_<DISPATCH>_ep<EP>_fsdp<FSDP>.
function(moe_dispatch_mesh_cases dispatch)
  foreach(mesh ${ARGN})
    string(REPLACE ":" ";" mesh ${mesh})
    list(GET mesh 0 np)
    list(GET mesh 1 ep)
    list(GET mesh 2 fsdp)
    moe_mpi_case(np${np}_${dispatch}_ep${ep}_fsdp${fsdp} ${np} --set dispatch=${dispatch}
                 --set mesh.ep=${ep} --set mesh.fsdp=${fsdp} --set model.topk=4
                 ${MOE_SIGMOID_GROUPS} ${MOE_LOSSES})
  endforeach()
endfunction()

# dispatch allgather (dispatch/allgather.h) on 1, 2, 4 and 8 ranks over EP x FSDP meshes, then
# with capacity drops by both policies, align padding, fp32, bf16 gradients and the overlap.
set(MOE_ALLGATHER --set dispatch=allgather)
moe_dispatch_mesh_cases(allgather 1:1:1 2:2:1 2:1:2 4:4:1 4:2:2 8:8:1 8:4:2)
moe_mpi_case(np1_allgather_capacity_align 1 ${MOE_ALLGATHER} --set align=8 --set capacity_factor=1.0)
moe_mpi_case(np4_allgather_capacity_align 4 ${MOE_ALLGATHER} --set mesh.ep=4 --set align=16
             --set capacity_factor=1.25 --set routing.mode=powerlaw)
moe_mpi_case(np4_allgather_capacity_position_hot 4 ${MOE_ALLGATHER} --set mesh.ep=2
             --set mesh.fsdp=2 --set capacity_factor=0.75 --set drop_policy=position
             --set routing.mode=hot --set expert_grad_dtype=bf16)
moe_mpi_case(np2_allgather_fp32_overlap 2 ${MOE_ALLGATHER} --set mesh.ep=2 --set dtype=fp32
             --set overlap=dispatch_bwd --set capacity_factor=1.0 ${MOE_SIGMOID_GROUPS})
moe_mpi_case(np4_allgather_sparse_tokens 4 ${MOE_ALLGATHER} --set mesh.ep=4 --set tokens_per_rank=3
             --set model.experts=16 --set model.topk=4)

# Shared experts (MATH.md "Shared experts"): held by every EP rank, split over FSDP, their
# gradients summed over the world; checked against the reference on 1, 2, 4 and 8 ranks, over
# EP-only, FSDP-only and mixed meshes. H 36 x F_sh 7 does not split evenly over 8 ranks (padding).
set(MOE_SHARED --set model.shared_experts=1 --set model.shared_ffn=48)
moe_mpi_case(np1_shared 1 ${MOE_SHARED} ${MOE_LOSSES})
moe_mpi_case(np2_ep2_shared 2 --set mesh.ep=2 --set mesh.fsdp=1 ${MOE_SHARED})
moe_mpi_case(np2_fsdp2_shared 2 --set mesh.ep=1 --set mesh.fsdp=2 ${MOE_SHARED})
moe_mpi_case(np4_ep2_fsdp2_two_shared 4 --set mesh.ep=2 --set mesh.fsdp=2
             --set model.shared_experts=2 --set model.shared_ffn=40 ${MOE_SIGMOID_GROUPS}
             ${MOE_LOSSES})
moe_mpi_case(np4_ep4_shared_overlap 4 --set mesh.ep=4 --set overlap=dispatch_bwd ${MOE_SHARED})
moe_mpi_case(np4_fsdp4_shared_fp32 4 --set mesh.ep=1 --set mesh.fsdp=4 --set dtype=fp32
             ${MOE_SHARED})
moe_mpi_case(np8_ep8_shared 8 --set mesh.ep=8 --set mesh.fsdp=1 ${MOE_SHARED} ${MOE_SIGMOID_GROUPS})
moe_mpi_case(np8_ep4_fsdp2_shared_bf16_grads 8 --set mesh.ep=4 --set mesh.fsdp=2
             --set expert_grad_dtype=bf16 --set model.hidden=36 --set model.shared_experts=2
             --set model.shared_ffn=7)
moe_mpi_case(np8_ep2_fsdp4_shared_capacity 8 --set mesh.ep=2 --set mesh.fsdp=4
             --set capacity_factor=1.0 --set align=8 ${MOE_SHARED})

# dispatch alltoall_dedup (dispatch/alltoall_dedup.h) on 1, 2, 4 and 8 ranks over EP x FSDP meshes,
# then with capacity drops by both policies, align padding, fp32, bf16 gradients, the overlap and
# shared experts; the tiny shape's 8 experts put 4, 2 or 1 of them on a rank, so a token's K rows
# share ranks or not.
set(MOE_DEDUP --set dispatch=alltoall_dedup)
moe_dispatch_mesh_cases(alltoall_dedup 1:1:1 2:2:1 4:4:1 4:2:2 8:8:1 8:4:2)
moe_mpi_case(np1_alltoall_dedup_capacity_align 1 ${MOE_DEDUP} --set align=8
             --set capacity_factor=1.0)
moe_mpi_case(np4_alltoall_dedup_capacity_align 4 ${MOE_DEDUP} --set mesh.ep=4 --set align=16
             --set capacity_factor=1.25 --set routing.mode=powerlaw --set model.topk=3)
moe_mpi_case(np4_alltoall_dedup_capacity_position_hot 4 ${MOE_DEDUP} --set mesh.ep=2
             --set mesh.fsdp=2 --set capacity_factor=0.75 --set drop_policy=position
             --set routing.mode=hot --set model.topk=4 --set expert_grad_dtype=bf16)
moe_mpi_case(np8_alltoall_dedup_ep8_capacity_probability 8 ${MOE_DEDUP} --set mesh.ep=8
             --set capacity_factor=1.0 --set model.topk=4 ${MOE_SIGMOID_GROUPS})
moe_mpi_case(np2_alltoall_dedup_fp32_overlap 2 ${MOE_DEDUP} --set mesh.ep=2 --set dtype=fp32
             --set overlap=dispatch_bwd --set capacity_factor=1.0 --set model.topk=4
             ${MOE_SIGMOID_GROUPS})
moe_mpi_case(np4_alltoall_dedup_sparse_tokens 4 ${MOE_DEDUP} --set mesh.ep=4
             --set tokens_per_rank=3 --set model.experts=16 --set model.topk=4)
moe_mpi_case(np4_alltoall_dedup_shared_overlap 4 ${MOE_DEDUP} --set mesh.ep=4
             --set overlap=dispatch_bwd --set model.topk=4 ${MOE_SHARED})
moe_mpi_case(np8_alltoall_dedup_ep4_fsdp2_shared_capacity_align 8 ${MOE_DEDUP} --set mesh.ep=4
             --set mesh.fsdp=2 --set capacity_factor=1.0 --set drop_policy=position --set align=8
             --set model.topk=3 --set model.shared_experts=2 --set model.shared_ffn=40)

# dispatch nvlink (dispatch/nvlink.h): the windows are MPI shared memory on the CPU backend, the
# same writes into other ranks' memory and barriers as between GPUs; on 1, 2, 4 and 8 ranks over
# EP x FSDP meshes, then with capacity drops by both policies, align padding, fp32, bf16
# gradients, the overlaps, shared experts, a sparse step and the sync-free step.
# tests/mpi/nvlink.sh compares it with alltoall_dedup, bit for bit.
set(MOE_NVLINK --set dispatch=nvlink)
moe_dispatch_mesh_cases(nvlink 1:1:1 2:2:1 4:4:1 4:2:2 8:8:1 8:4:2)
moe_mpi_case(np4_nvlink_capacity_align 4 ${MOE_NVLINK} --set mesh.ep=4 --set align=16
             --set capacity_factor=1.25 --set routing.mode=powerlaw --set model.topk=3)
moe_mpi_case(np4_nvlink_capacity_position_hot 4 ${MOE_NVLINK} --set mesh.ep=2 --set mesh.fsdp=2
             --set capacity_factor=0.75 --set drop_policy=position --set routing.mode=hot
             --set model.topk=4 --set expert_grad_dtype=bf16)
moe_mpi_case(np2_nvlink_fp32_overlap 2 ${MOE_NVLINK} --set mesh.ep=2 --set dtype=fp32
             --set overlap=dispatch_bwd --set capacity_factor=1.0 --set model.topk=4)
moe_mpi_case(np4_nvlink_sparse_tokens 4 ${MOE_NVLINK} --set mesh.ep=4 --set tokens_per_rank=3
             --set model.experts=16 --set model.topk=4)
moe_mpi_case(np8_nvlink_ep4_fsdp2_shared_capacity_align 8 ${MOE_NVLINK} --set mesh.ep=4
             --set mesh.fsdp=2 --set capacity_factor=1.0 --set align=8 --set model.topk=3
             --set model.shared_experts=2 --set model.shared_ffn=40)
moe_mpi_case(np4_ep4_nvlink_graph 4 ${MOE_NVLINK} --set mesh.ep=4 --set graph=true --warmup 2
             --set align=16 --set model.topk=4)

# overlap pipeline (docs/layer.md, "Schedules"): the step in overlap_chunks chunks, one dispatcher
# each, checked against float64 on 1, 2, 4 and 8 ranks over EP x FSDP meshes with both
# dispatchers; then with shared experts, align padding, fp32, and capacity drops (per chunk) by
# both policies. tests/mpi/pipeline.sh compares it with overlap none.
foreach(mesh "1;1;1;4" "2;2;1;2" "2;1;2;4" "4;4;1;2" "4;2;2;4" "8;8;1;2" "8;4;2;8")
  list(GET mesh 0 np)
  list(GET mesh 1 ep)
  list(GET mesh 2 fsdp)
  list(GET mesh 3 chunks)
  foreach(dispatch alltoall allgather)
    moe_mpi_case(np${np}_pipeline${chunks}_${dispatch}_ep${ep}_fsdp${fsdp} ${np}
                 --set overlap=pipeline --set overlap_chunks=${chunks} --set dispatch=${dispatch}
                 --set mesh.ep=${ep} --set mesh.fsdp=${fsdp} ${MOE_LOSSES})
  endforeach()
endforeach()
moe_mpi_case(np1_pipeline1 1 --set overlap=pipeline --set overlap_chunks=1 ${MOE_SHARED})
moe_mpi_case(np2_ep2_pipeline4_shared_align 2 --set mesh.ep=2 --set overlap=pipeline
             --set overlap_chunks=4 --set align=16 ${MOE_SHARED} ${MOE_SIGMOID_GROUPS})
moe_mpi_case(np4_ep2_fsdp2_pipeline2_allgather_shared 4 --set mesh.ep=2 --set mesh.fsdp=2
             --set overlap=pipeline --set dispatch=allgather --set model.shared_experts=2
             --set model.shared_ffn=40 ${MOE_LOSSES})
moe_mpi_case(np4_ep4_pipeline4_fp32 4 --set mesh.ep=4 --set overlap=pipeline
             --set overlap_chunks=4 --set dtype=fp32 ${MOE_SIGMOID_GROUPS} ${MOE_LOSSES})
moe_mpi_case(np2_ep2_pipeline2_allgather_fp32_align 2 --set mesh.ep=2 --set overlap=pipeline
             --set dispatch=allgather --set dtype=fp32 --set align=8)
moe_mpi_case(np4_ep2_fsdp2_pipeline4_capacity_probability 4 --set mesh.ep=2 --set mesh.fsdp=2
             --set overlap=pipeline --set overlap_chunks=4 --set capacity_factor=1.0
             ${MOE_SIGMOID_GROUPS} ${MOE_LOSSES})
moe_mpi_case(np4_ep4_pipeline2_allgather_capacity_position_hot 4 --set mesh.ep=4
             --set overlap=pipeline --set dispatch=allgather --set capacity_factor=0.75
             --set drop_policy=position --set routing.mode=hot --set align=16)
moe_mpi_case(np8_ep4_fsdp2_pipeline4_shared 8 --set mesh.ep=4 --set mesh.fsdp=2
             --set overlap=pipeline --set overlap_chunks=4 ${MOE_SHARED} ${MOE_SIGMOID_GROUPS})
# the pipeline with the deduplicated dispatcher
moe_mpi_case(np2_ep2_pipeline2_alltoall_dedup 2 --set mesh.ep=2 --set overlap=pipeline
             ${MOE_DEDUP} ${MOE_LOSSES})
moe_mpi_case(np4_ep4_pipeline4_alltoall_dedup_shared_capacity 4 --set mesh.ep=4
             --set overlap=pipeline --set overlap_chunks=4 ${MOE_DEDUP} --set capacity_factor=1.0
             --set model.topk=4 ${MOE_SHARED})
moe_mpi_case(np4_ep2_fsdp2_pipeline4_nvlink_shared_capacity_graph 4 --set mesh.ep=2
             --set mesh.fsdp=2 --set overlap=pipeline --set overlap_chunks=4 ${MOE_NVLINK}
             --set capacity_factor=1.0 --set model.topk=4 ${MOE_SHARED} --set graph=true
             --warmup 2)

# FP8 expert GEMMs (MATH.md "FP8 expert GEMMs"), both recipes, against the float64 reference that
# quantizes the same operands: a shape with two 128-wide blocks along H, partial blocks along F
# and experts of more than 128 rows per GEMM, on EP x FSDP meshes with every dispatcher, the
# pipeline's chunks (each its own operand), capacity drops and align padding, shared experts,
# and the sync-free step. tests/mpi/fp8.sh checks the result JSON and the refusals.
set(MOE_FP8_SHAPE --set model.hidden=256 --set model.ffn=160 --set tokens_per_rank=256)
foreach(recipe fp8_tensor fp8_block)
  set(p --set precision=${recipe} ${MOE_FP8_SHAPE})
  moe_mpi_case(np2_ep2_${recipe} 2 ${p} --set mesh.ep=2 ${MOE_SIGMOID_GROUPS})
  moe_mpi_case(np4_ep2_fsdp2_${recipe}_pipeline4_shared 4 ${p} --set mesh.ep=2 --set mesh.fsdp=2
               --set overlap=pipeline --set overlap_chunks=4 ${MOE_SHARED})
  moe_mpi_case(np4_ep4_${recipe}_dedup_capacity_align 4 ${p} --set mesh.ep=4 ${MOE_DEDUP}
               --set capacity_factor=1.0 --set align=16)
  moe_mpi_case(np4_ep2_fsdp2_${recipe}_allgather_graph 4 ${p} --set mesh.ep=2 --set mesh.fsdp=2
               --set dispatch=allgather --set graph=true --warmup 2)
endforeach()

# dispatch_dtype fp8 (fp8_block): x crosses the wire packed (codes and 1 x 128 scales) through
# every dispatcher, chunked, dropped, padded and sync-free, against the reference whose w_in
# gradient takes the dispatched rows back in bf16.
set(p --set precision=fp8_block --set dispatch_dtype=fp8 ${MOE_FP8_SHAPE})
moe_mpi_case(np2_ep2_fp8_dispatch 2 ${p} --set mesh.ep=2)
moe_mpi_case(np4_ep2_fsdp2_fp8_dispatch_pipeline2_shared_capacity 4 ${p} --set mesh.ep=2
             --set mesh.fsdp=2 --set overlap=pipeline ${MOE_SHARED} --set capacity_factor=1.0
             --set align=16)
moe_mpi_case(np4_ep4_fp8_dispatch_dedup_align 4 ${p} --set mesh.ep=4 ${MOE_DEDUP} --set align=16)
moe_mpi_case(np4_ep4_fp8_dispatch_nvlink_align 4 ${p} --set mesh.ep=4 ${MOE_NVLINK} --set align=16)
moe_mpi_case(np4_ep2_fsdp2_fp8_dispatch_allgather_graph 4 ${p} --set mesh.ep=2 --set mesh.fsdp=2
             --set dispatch=allgather --set graph=true --warmup 2)

# Script cases: determinism (bitwise equal digests across runs and meshes-independent inputs),
# a dump reproduced by the independent numpy verifier, bad input on every rank, and the roofline
# calibration's floors and efficiencies in the result JSON.
foreach(script determinism dump_verify bad_input sweep_report compare rank_failure roofline ab
               expert_grad_dtype overlap dry_run mesh_invariance refusals discovery launch
               allgather alltoall_dedup nvlink pipeline graph fp8 dispatch_bench a2a_wait
               warmup_s placement check_every fuzz)
  add_test(NAME mpi.${script}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/${script}.sh $<TARGET_FILE:moebench>
                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(mpi.${script} PROPERTIES LABELS mpi TIMEOUT 600)
  moe_mpi_test_env(mpi.${script})
endforeach()
