#include <cstdio>
#include <exception>
#include <vector>

#include "comm/cuda_ipc_window.h"
#include "comm/mpi_window.h"
#include "core/bounded_wait.h"
#include "core/error.h"

namespace moe {
namespace {

// Ahead of each rank's window: [0] its barrier count, [1 + r] the count rank r last reached.
constexpr size_t kFlagBytes = kWindowHeaderBytes;
static_assert(8 * (1 + kMaxWindowRanks) <= kFlagBytes, "flags fit ahead of the window");

struct FlagPointers {
  int64_t* rank[kMaxWindowRanks];
};

__device__ inline void store_release_sys(int64_t* p, int64_t v) {
  asm volatile("st.release.sys.global.s64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ inline int64_t load_acquire_sys(const int64_t* p) {
  int64_t v;
  asm volatile("ld.acquire.sys.global.s64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ inline uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread per peer: the count this barrier reaches goes to the peer's flag for this rank (the
// fence first, so that this rank's earlier writes into the windows are seen before it), then the
// thread waits for the peer's count in this rank's flag for it. The count lives on the device, so
// a captured graph's replays count on.
__global__ void window_barrier_kernel(FlagPointers flags, int me, int n, uint64_t timeout_ns) {
  __shared__ int64_t count;
  int64_t* mine = flags.rank[me];
  if (threadIdx.x == 0) count = mine[0] + 1;
  __syncthreads();
  const int r = int(threadIdx.x);
  if (r < n && r != me) {
    __threadfence_system();
    store_release_sys(flags.rank[r] + 1 + me, count);
    const uint64_t start = global_ns();
    while (load_acquire_sys(mine + 1 + r) < count) {
      if (global_ns() - start > timeout_ns) {
        printf(
            "moebench: rank %d of a window waited %.0f s at barrier %lld for rank %d, which "
            "never came (stopped, stuck or dead): trapping\n",
            me, double(timeout_ns) * 1e-9, static_cast<long long>(count), r);
        __trap();
      }
      __nanosleep(64);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) mine[0] = count;
}

}  // namespace

CudaIpcWindow::CudaIpcWindow(MPI_Comm group, CudaDevice& device, size_t bytes, double timeout_s)
    : device_(device), timeout_s_(timeout_s) {
  group_ = window_host_group(group, timeout_s);
  int size = 0;
  MPI_CHECK(MPI_Comm_rank(group_, &rank_));
  MPI_CHECK(MPI_Comm_size(group_, &size));
  bytes_ = bytes;
  mine_ = device_.alloc(kFlagBytes + bytes);  // zero-filled: every count starts at 0
  cudaIpcMemHandle_t handle;
  CUDA_CHECK(cudaIpcGetMemHandle(&handle, mine_));
  std::vector<cudaIpcMemHandle_t> handles(static_cast<size_t>(size));
  allgather_bounded(&handle, handles.data(), int(sizeof(handle)), MPI_BYTE, group_,
                    "the window's IPC handles", timeout_s_);
  bases_.resize(size_t(size));
  for (int r = 0; r < size; ++r) {
    void* base = mine_;
    if (r != rank_) {
      const cudaError_t rc =
          cudaIpcOpenMemHandle(&base, handles[size_t(r)], cudaIpcMemLazyEnablePeerAccess);
      MOE_USER_CHECK(rc == cudaSuccess,
                     "dispatch = nvlink: this rank cannot map EP rank "
                         << r << "'s GPU memory (cudaIpcOpenMemHandle: " << cudaGetErrorString(rc)
                         << "); it needs every GPU of an EP group in one host with peer access "
                            "(NVLink or PCIe P2P), and each rank seeing the others' GPUs (not "
                            "one GPU a rank through CUDA_VISIBLE_DEVICES or srun "
                            "--gpus-per-task=1): launch so, or use another dispatch");
      opened_.push_back(base);
    }
    flags_[r] = static_cast<int64_t*>(base);
    bases_[size_t(r)] = static_cast<char*>(base) + kFlagBytes;
  }
}

CudaIpcWindow::~CudaIpcWindow() {
  // A peer may still write here until it has passed its last barrier: on the normal path wait
  // for the group first. Unwinding from an error, the job is on its way to MPI_Abort and a
  // barrier could wait forever.
  if (std::uncaught_exceptions() == 0) {
    device_.sync();
    barrier_bounded(group_, "the window's release", timeout_s_);
  }
  for (void* p : opened_) cudaIpcCloseMemHandle(p);
  device_.release(mine_);
  MPI_Comm_free(&group_);
}

void CudaIpcWindow::put(int r, size_t offset, const void* src, size_t bytes) {
  MOE_CHECK(r >= 0 && r < ranks() && offset + bytes <= bytes_,
            "window put of " << bytes << " bytes at " << offset << " to rank " << r << " of "
                             << ranks() << " (" << bytes_ << " bytes each)");
  if (!bytes) return;
  CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(peer(r)) + offset, src, bytes,
                             cudaMemcpyDeviceToDevice, device_.stream()));
}

void CudaIpcWindow::barrier() {
  if (ranks() == 1) return;
  FlagPointers f{};
  for (int r = 0; r < ranks(); ++r) f.rank[r] = flags_[r];
  window_barrier_kernel<<<1, 32, 0, device_.stream()>>>(f, rank_, ranks(),
                                                        uint64_t(timeout_s_ * 1e9));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace moe
