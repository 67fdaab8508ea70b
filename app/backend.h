#pragma once
// Choosing and building a backend: {CpuDevice, CpuOps, MpiComm} or {CudaDevice, CudaOps, NcclComm}.
#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/launch.h"
#include "comm/comm.h"
#include "core/device.h"
#include "core/mesh.h"
#include "core/ops.h"
#include "core/reference.h"
#include "core/workload.h"

namespace moe {

struct Backend {
  std::string name;
  // Destroyed in reverse: the comm (NCCL uses the device's streams), the ops (their scratch is
  // device memory), then the device.
  std::unique_ptr<Device> device;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<Comm> comm;
  std::map<std::string, std::string> info;  // versions and device, for provenance
  ExpertGemmMethods gemm_methods;           // each expert GEMM's method set up ("": one way)
  std::vector<RankPlace> places;            // every rank's host (and GPU), in rank order
};

// "auto" -> "cuda" in a CUDA build with a visible GPU, else "cpu". Throws UserError for a backend
// this build or machine cannot run.
std::string resolve_backend(const std::string& asked);

// Throws UserError, naming the key and the fix, for a workload feature this backend lacks.
void check_backend_supports(const std::string& name, const Workload& w);

// Where the check's reference math runs for this backend: "cpu" or "gpu" (workload key
// `reference`; auto follows the backend).
std::string reference_device(const std::string& backend, const Workload& w);
ReferenceMathFactory reference_math_factory(const std::string& backend, const Workload& w);

// Bytes per stored element of dtype on this backend (the CPU backend keeps floats).
int storage_bytes_of(const std::string& backend, DType dtype);

// What one rank of `backend` needs for w, estimated before anything is allocated (the run
// refuses a workload beyond the free memory; --dry-run prints it): the step's buffers in the
// backend's memory, and the check's reference (none with check off).
struct MemoryNeed {
  StepMemory step;  // by what the buffers hold; step.total() in all
  ReferenceBytes check;
};
MemoryNeed estimate_memory_need(const Workload& w, int world_size, const std::string& backend);

// This host's memory in all (MemTotal), 0 when unknown; and how many ranks of world share it.
int64_t host_memory_total_bytes();
// The first visible GPU's memory in bytes; 0 without a GPU or a CUDA build.
int64_t gpu_memory_total_bytes();
int ranks_on_this_host(MPI_Comm world);

// Bytes this backend can give one rank (GPU memory for cuda, a share of host memory for cpu);
// 0 when unknown.
int64_t backend_memory_available(const std::string& name, MPI_Comm world);

// The CUDA runtime and NCCL versions this build was compiled against ("CUDA runtime 12.4, NCCL
// 2.21.5"), "" in a build without CUDA: for --version, where no GPU need be present.
std::string backend_build_versions();

Backend make_backend(const std::string& name, MPI_Comm world, const Mesh& mesh, const Workload& w,
                     double timeout_s);

#ifdef MOE_HAVE_CUDA
// GPU `gpu`'s name and the CUDA runtime, driver and NCCL versions (a result's provenance).
std::map<std::string, std::string> cuda_backend_info(int gpu);
#endif

}  // namespace moe
