#pragma once
// Check macros for CUDA and cuBLAS(Lt): each names the call, file, line and (through
// moe::throw_error) the rank. Out of memory says so, with the size when the caller knows it.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

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
