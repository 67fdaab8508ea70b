#pragma once
// One error type for the whole program, and one check macro per library (MPI, CUDA, cuBLAS(Lt),
// NCCL), all here. Every message names the failed call or condition, the file and line, and the
// rank, so that a log line from any of N ranks tells where to look. A library's macro expands to
// its own calls, so it compiles only where that library's header is included (cuda_runtime.h,
// cublasLt.h, nccl.h); this header includes none of them.
#include <sstream>
#include <stdexcept>
#include <string>

namespace moe {

// What went wrong, already formatted for the user: "rank R: <what> (file:line)".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An error the user can fix (bad config, bad flag): printed once, without file and line.
class UserError : public Error {
 public:
  explicit UserError(const std::string& what) : Error(what) {}
};

// The calling process's rank in MPI_COMM_WORLD, or -1 before MPI_Init / after MPI_Finalize.
int world_rank_or_minus_one();

[[noreturn]] void throw_error(const char* file, int line, const std::string& what);

}  // namespace moe

// MOE_CHECK(cond, "text " << value): streams a message with the expected value.
#define MOE_CHECK(cond, msg)                                       \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::ostringstream moe_check_os_;                            \
      moe_check_os_ << "check failed: " #cond ": " << msg;         \
      ::moe::throw_error(__FILE__, __LINE__, moe_check_os_.str()); \
    }                                                              \
  } while (0)

// A configuration or usage error: names the key and the fix, no file/line noise.
#define MOE_USER_CHECK(cond, msg)                  \
  do {                                             \
    if (!(cond)) {                                 \
      std::ostringstream moe_check_os_;            \
      moe_check_os_ << msg;                        \
      throw ::moe::UserError(moe_check_os_.str()); \
    }                                              \
  } while (0)

#define MPI_CHECK(call)                                                                      \
  do {                                                                                       \
    int moe_mpi_rc_ = (call);                                                                \
    if (moe_mpi_rc_ != MPI_SUCCESS) {                                                        \
      char moe_mpi_msg_[MPI_MAX_ERROR_STRING];                                               \
      int moe_mpi_len_ = 0;                                                                  \
      MPI_Error_string(moe_mpi_rc_, moe_mpi_msg_, &moe_mpi_len_);                            \
      ::moe::throw_error(__FILE__, __LINE__, std::string(#call " failed: ") + moe_mpi_msg_); \
    }                                                                                        \
  } while (0)

// CUDA, cuBLAS(Lt) and NCCL: need <cuda_runtime.h>, <cublasLt.h>, <nccl.h> where used.
#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    cudaError_t moe_cuda_rc_ = (call);                                                            \
    if (moe_cuda_rc_ != cudaSuccess)                                                              \
      ::moe::throw_error(__FILE__, __LINE__,                                                      \
                         std::string(#call " failed: ") + cudaGetErrorName(moe_cuda_rc_) + " (" + \
                             cudaGetErrorString(moe_cuda_rc_) + ")");                             \
  } while (0)

#define CUBLAS_CHECK(call)                                                                        \
  do {                                                                                            \
    cublasStatus_t moe_cublas_rc_ = (call);                                                       \
    if (moe_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::moe::throw_error(__FILE__, __LINE__,                                                      \
                         std::string(#call " failed: ") + cublasLtGetStatusName(moe_cublas_rc_) + \
                             " (" + cublasLtGetStatusString(moe_cublas_rc_) + ")");               \
  } while (0)

#define NCCL_CHECK(call)                                                                     \
  do {                                                                                       \
    ncclResult_t moe_nccl_rc_ = (call);                                                      \
    if (moe_nccl_rc_ != ncclSuccess)                                                         \
      ::moe::throw_error(__FILE__, __LINE__,                                                 \
                         std::string(#call " failed: ") + ncclGetErrorString(moe_nccl_rc_) + \
                             ": " + ncclGetLastError(nullptr));                              \
  } while (0)
