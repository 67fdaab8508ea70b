#pragma once
// Marks a function that both the host compiler and nvcc compile, for the few definitions the
// host and the GPU must share bit for bit (the seeded data and the bf16 rounding).
#ifdef __CUDACC__
#define MOE_HD __host__ __device__
#else
#define MOE_HD
#endif
