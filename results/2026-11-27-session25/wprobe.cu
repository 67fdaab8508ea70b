// Write-bandwidth probe (session 25): how fast can an H100 write a weight gradient's bytes?
// memset, coalesced 16-byte stores, and the wgrad tile pattern (128 rows x 512 B per tile,
// M-fastest or N-fastest over [G][M][N] bf16), with default and streaming (.cs) stores; reads.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>
#define CK(x)                                        \
  do {                                               \
    cudaError_t e = (x);                             \
    if (e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      exit(1);                                       \
    }                                                \
  } while (0)

__global__ void write_lin(uint4* p, size_t n, int cs) {
  uint4 v = make_uint4(threadIdx.x, 1, 2, 3);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    if (cs)
      __stcs(p + i, v);
    else
      p[i] = v;
}
// C [G][M][N] bf16, tiles 128 x 256 (512 B of each of 128 rows); tile t of the persistent walk.
__global__ void write_tiles(uint4* C, int G, int M, int N, int nfast, int cs) {
  const int mt = M / 128, nt = N / 256, per = mt * nt;
  const size_t row16 = size_t(N) / 8;  // uint4 per row
  for (int t = blockIdx.x; t < G * per; t += gridDim.x) {
    int g = t / per, r = t % per;
    int mb = nfast ? r / nt : r % mt, nb = nfast ? r % nt : r / mt;
    uint4* base = C + (size_t(g) * M + size_t(mb) * 128) * row16 + nb * 32;
    uint4 v = make_uint4(t, threadIdx.x, 2, 3);
    // 256 threads: 32 uint4 per row, 8 rows per pass, 16 passes
    for (int pass = 0; pass < 16; ++pass) {
      int row = pass * 8 + threadIdx.x / 32, col = threadIdx.x % 32;
      if (cs)
        __stcs(base + size_t(row) * row16 + col, v);
      else
        base[size_t(row) * row16 + col] = v;
    }
  }
}
__global__ void read_lin(const uint4* p, size_t n, unsigned* out) {
  unsigned s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = __ldcs(p + i);
    s ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (s == 0x12345678) out[0] = s;
}
template <class F>
float timeit(F f, int reps = 7) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  f();
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    CK(cudaEventSynchronize(b));
    float m;
    cudaEventElapsedTime(&m, a, b);
    ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
int main() {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int G = 128, M = 7168, N = 4096;  // DeepSeek-V3 wgrad_in at EP 2: 7.5 GB
  const size_t bytes = size_t(G) * M * N * 2;
  void* p;
  CK(cudaMalloc(&p, bytes));
  unsigned* o;
  CK(cudaMalloc(&o, 4));
  auto gbs = [&](float ms) { return bytes / (ms * 1e-3) / 1e9; };
  float t;
  t = timeit([&] { cudaMemsetAsync(p, 0, bytes); });
  printf("memset               %.3f ms %.0f GB/s\n", t, gbs(t));
  for (int cs = 0; cs < 2; ++cs) {
    t = timeit([&] { write_lin<<<sms * 8, 256>>>((uint4*)p, bytes / 16, cs); });
    printf("write linear cs=%d    %.3f ms %.0f GB/s\n", cs, t, gbs(t));
    for (int nf = 0; nf < 2; ++nf)
      for (int bpsm = 1; bpsm <= 4; bpsm *= 2) {
        t = timeit([&] { write_tiles<<<sms * bpsm, 256>>>((uint4*)p, G, M, N, nf, cs); });
        printf("write tiles nfast=%d cs=%d blocks/SM=%d %.3f ms %.0f GB/s\n", nf, cs, bpsm, t,
               gbs(t));
      }
  }
  t = timeit([&] { read_lin<<<sms * 8, 256>>>((const uint4*)p, bytes / 16, o); });
  printf("read linear          %.3f ms %.0f GB/s\n", t, gbs(t));
  t = timeit(
      [&] { cudaMemcpyAsync(p, (char*)p + bytes / 2, bytes / 2, cudaMemcpyDeviceToDevice); });
  printf("copy (half each way) %.3f ms %.0f GB/s (r+w)\n", t, bytes / (t * 1e-3) / 1e9);
  return 0;
}
