#include "app/backend.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "app/launch.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "core/fp8.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_ops.h"

#ifdef MOE_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/nccl_comm.h"
#include "core/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/reference.h"
#endif

namespace moe {
namespace {

int64_t host_memory_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

int visible_gpus() {
#ifdef MOE_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

}  // namespace

int64_t gpu_memory_total_bytes() {
#ifdef MOE_HAVE_CUDA
  if (visible_gpus() == 0) return 0;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return int64_t(prop.totalGlobalMem);
#else
  return 0;
#endif
}

int64_t host_memory_total_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (f >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : 0;
}

int ranks_on_this_host(MPI_Comm world) {
  int n = 1;
  local_rank_and_size(world, &n);
  return n;
}

std::string resolve_backend(const std::string& asked) {
  if (asked == "cpu") return "cpu";
  if (asked == "auto") return visible_gpus() > 0 ? "cuda" : "cpu";
  if (asked == "cuda") {
#ifndef MOE_HAVE_CUDA
    MOE_USER_CHECK(false,
                   "--backend cuda: this build has no CUDA backend (nvcc was not found at "
                   "configure time, or -DMOE_CUDA=OFF); use --backend cpu");
#endif
    MOE_USER_CHECK(visible_gpus() > 0,
                   "--backend cuda: no GPU is visible to this process; use --backend cpu");
    return "cuda";
  }
  MOE_USER_CHECK(false, "--backend " << asked << ": unknown backend; use auto, cpu or cuda");
  return "";
}

void check_backend_supports(const std::string& name, const Workload& w) {
  // The CPU backend has one way to run its GEMMs: a run must not record knobs it did not turn.
  const GemmConfig cuda_only;
  MOE_USER_CHECK(
      name == "cuda" || (w.gemm.method == cuda_only.method && w.gemm.methods == cuda_only.methods &&
                         w.gemm.streams == cuda_only.streams && w.gemm.algo == cuda_only.algo),
      "gemm.method, gemm.method_*, gemm.streams and gemm.algo choose among the CUDA backend's "
      "GEMM paths; the "
          << name << " backend has one: leave them at their defaults (auto, auto, 4, auto)");
  // The sync-free step's expert GEMMs read the device offsets: only the grouped sm90 kernel does.
  for (int g = 0; g < kNumExpertGemms; ++g)
    MOE_USER_CHECK(!w.graph || name != "cuda" || w.gemm.methods[size_t(g)] == GemmMethod::kAuto ||
                       w.gemm.methods[size_t(g)] == GemmMethod::kGroupedSm90,
                   "graph = true runs every expert GEMM on the grouped sm90 kernel, and "
                   "gemm.method_"
                       << kExpertGemmNames[size_t(g)] << " = " << name_of(w.gemm.methods[size_t(g)])
                       << ": set it to grouped_sm90 or auto, "
                       << "or graph=false");
  MOE_USER_CHECK(
      !w.graph || name != "cuda" ||
          ((w.gemm.method == GemmMethod::kAuto || w.gemm.method == GemmMethod::kGroupedSm90) &&
           w.dtype == DType::kBf16),
      "graph = true runs the expert GEMMs on the grouped sm90 kernel, which reads "
      "the row offsets on the GPU (the other methods need them on the host) and "
      "takes bf16: set gemm.method=grouped_sm90 (or auto) and dtype=bf16, or "
      "graph=false");
  if (name == "cuda" && w.precision != Precision::kBf16) {
    // cuBLASLt's FP8 matmul, one call per expert, or the grouped sm90 kernel
    // (kernels/cuda/expert_ffn_fp8.h).
    const std::string fp8 =
        "precision = \"" + std::string(name_of(w.precision)) + "\" on the CUDA backend ";
    MOE_USER_CHECK(w.gemm.method != GemmMethod::kGroupedBatched,
                   fp8 << "has no cuBLAS grouped call: set gemm.method to auto, lt_multistream "
                          "or grouped_sm90");
    for (int g = 0; g < kNumExpertGemms; ++g)
      MOE_USER_CHECK(w.gemm.methods[size_t(g)] != GemmMethod::kGroupedBatched,
                     fp8 << "has no cuBLAS grouped call: set gemm.method_"
                         << kExpertGemmNames[size_t(g)]
                         << " to auto, lt_multistream or grouped_sm90");
    MOE_USER_CHECK(w.align % 16 == 0,
                   fp8 << "needs each expert's rows to start at a multiple of 16 (Hopper's FP8 "
                          "kernels read 16-byte aligned operands; align is "
                       << w.align << "): set align=16");
    MOE_USER_CHECK(w.model.hidden % 16 == 0 && w.model.ffn % 16 == 0 &&
                       (w.model.shared_experts == 0 || w.model.shared_ffn % 16 == 0),
                   fp8 << "needs model.hidden, model.ffn and model.shared_ffn multiples of 16 "
                          "(FP8 rows of 16-byte multiples)");
    const int64_t E_local = w.model.experts / std::max<int64_t>(w.mesh.ep, 1);
    MOE_USER_CHECK(E_local <= kFp8CudaMaxGroups,
                   fp8 << "quantizes at most " << kFp8CudaMaxGroups << " local experts per call; "
                       << "model.experts = " << w.model.experts << " over mesh.ep = "
                       << (w.mesh.ep ? std::to_string(w.mesh.ep) : std::string("auto (1 here)"))
                       << " gives " << E_local
                       << ": set mesh.ep so that experts / ep <= " << kFp8CudaMaxGroups);
  }
  MOE_USER_CHECK(w.reference != ReferenceDevice::kGpu || name == "cuda",
                 "reference = \"gpu\" needs --backend cuda (this run uses "
                     << name << "); set reference=cpu or reference=auto");
}

std::string reference_device(const std::string& backend, const Workload& w) {
  if (w.reference != ReferenceDevice::kAuto) return name_of(w.reference);
  return backend == "cuda" ? "gpu" : "cpu";
}

ReferenceMathFactory reference_math_factory(const std::string& backend, const Workload& w) {
#ifdef MOE_HAVE_CUDA
  if (reference_device(backend, w) == "gpu") return cuda::gpu_reference_math;
#else
  (void)backend;
  (void)w;
#endif
  return cpu_reference_math_from_seed;
}

int storage_bytes_of(const std::string& backend, DType dtype) {
  return backend == "cuda" && dtype == DType::kBf16 ? 2 : 4;
}

MemoryNeed estimate_memory_need(const Workload& w, int world_size, const std::string& backend) {
  Workload no_check = w;
  no_check.check = CheckMode::kOff;
  MemoryNeed need;
  need.step =
      estimate_step_memory(no_check, world_size, storage_bytes_of(backend, w.dtype),
                           storage_bytes_of(backend, w.expert_grad_dtype), backend == "cuda");
  if (w.check != CheckMode::kOff)
    need.check = estimate_reference_bytes(w, world_size, reference_device(backend, w) == "gpu");
  return need;
}

int64_t backend_memory_available(const std::string& name, MPI_Comm world) {
  int local_size = 1;
  const int local = local_rank_and_size(world, &local_size);
#ifndef MOE_HAVE_CUDA
  (void)name;
  (void)local;
#else
  if (name == "cuda") {
    int gpu = 0;
    try {
      gpu = gpu_for_rank(local, local_size, visible_gpus());
    } catch (const UserError&) {
      return 0;  // unknown: make_backend refuses this launch, with the counts, as set-up fails
    }
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaSetDevice(gpu));
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return int64_t(free_b);
  }
#endif
  return host_memory_available_bytes() / local_size;
}

std::string backend_build_versions() {
#ifdef MOE_HAVE_CUDA
  return "CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + ", NCCL " + std::to_string(NCCL_MAJOR) + "." +
         std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
#else
  return "";
#endif
}

#ifdef MOE_HAVE_CUDA
std::map<std::string, std::string> cuda_backend_info(int gpu) {
  std::map<std::string, std::string> info;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
  int rt = 0, drv = 0, nccl = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  ncclGetVersion(&nccl);
  info["device"] = prop.name;
  info["cuda_runtime"] = std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
  // The CUDA level the driver supports; nvidia_driver is the driver's own release.
  info["cuda_driver"] = std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
  const std::string nvidia = nvidia_driver_version();
  info["nvidia_driver"] = nvidia.empty() ? "unknown (no /proc/driver/nvidia/version)" : nvidia;
  info["nccl"] = std::to_string(nccl / 10000) + "." + std::to_string(nccl % 10000 / 100) + "." +
                 std::to_string(nccl % 100);
  return info;
}
#endif

Backend make_backend(const std::string& name, MPI_Comm world, const Mesh& mesh, const Workload& w,
                     double timeout_s) {
  Backend b;
  b.name = name;
  RankPlace me;
  MPI_Comm_rank(world, &me.rank);
  me.host = host_name();
  if (name == "cpu") {
    b.places = gather_places(me, world, timeout_s);
    if (me.rank == 0) spdlog::info("hosts: {}", describe_hosts(b.places));
    b.device = std::make_unique<CpuDevice>(w.dtype);
    b.ops = std::make_unique<CpuOps>(*b.device);
    b.comm = std::make_unique<MpiComm>(world, mesh, timeout_s);
    return b;
  }
#ifdef MOE_HAVE_CUDA
  int local_size = 1;
  const int local = local_rank_and_size(world, &local_size);
  int gpu = 0;
  try {
    gpu = gpu_for_rank(local, local_size, visible_gpus());
  } catch (const UserError& e) {
    throw UserError("host " + me.host + ": " + e.what());
  }
  auto device = std::make_unique<CudaDevice>(gpu, w.dtype);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
  char bus_id[32] = {0};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id) - 1, gpu));
  me.gpu = gpu;
  me.pci_bus_id = bus_id;
  me.uuid = gpu_uuid_string(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));
  me.gpu_name = prop.name;
  // Each rank says where it is before the first collective that could hang on a wrong placement
  // (NCCL's set-up); rank 0 then prints every rank's, in order.
  spdlog::debug("{}", me.describe());
  b.places = gather_places(me, world, timeout_s);
  if (me.rank == 0)
    for (const RankPlace& p : b.places) spdlog::info("{}", p.describe());
  check_no_shared_gpu(b.places);
  auto ops = std::make_unique<CudaOps>(*device, w.gemm, w.graph, w.precision);
  auto comm = std::make_unique<NcclComm>(world, mesh, *device, timeout_s);
  // The device's waits poll NCCL's errors, under the run's timeout: a dead peer ends the job.
  NcclComm* c = comm.get();
  device->set_waiter([c](const char* what) { c->wait(what); });
  b.info = cuda_backend_info(gpu);
  b.gemm_methods = ops->current_expert_gemm_methods();
  b.device = std::move(device);
  b.ops = std::move(ops);
  b.comm = std::move(comm);
  return b;
#else
  (void)mesh;
  MOE_CHECK(false, "backend " << name << " is not built in");
  return b;
#endif
}

}  // namespace moe
