# Throwaway: does a memory-bound kernel hide behind cuBLAS GEMMs on other streams (H200, power cap)?
# Mixtral-8x7B at 8192 tokens: 8 experts x 2048 rows; wgrad_out-like GEMMs (14336 x 4096 x 2048)
# and dgrad_x-like (2048 x 4096 x 28672), bf16 and FP8 (_scaled_mm); the memory op: SwiGLU-bwd-like
# (reads 3 x [2048, 14336] per expert, writes 2) on each expert's rows.
import torch, statistics
torch.manual_seed(0)
dev = 'cuda'
E, R, H, F = 8, 2048, 4096, 14336
S = [torch.cuda.Stream() for _ in range(4)]
memS = torch.cuda.Stream()

def timeit(fn, n=15, w=3):
    for _ in range(w): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

da = torch.randn(E * R, F, device=dev, dtype=torch.bfloat16)
g = torch.randn(E * R, F, device=dev, dtype=torch.bfloat16)
u = torch.randn(E * R, F, device=dev, dtype=torch.bfloat16)
dg = torch.empty_like(g); du = torch.empty_like(u)
def mem_piece(e):
    sl = slice(e * R, (e + 1) * R)
    s = torch.sigmoid(g[sl])
    torch.mul(da[sl], s, out=du[sl])
    torch.mul(da[sl], u[sl], out=dg[sl])
def mem_all():
    for e in range(E): mem_piece(e)

def make_gemms(kind, fp8):
    if kind == 'wgrad_out': M, N, K = F, H, R
    else: M, N, K = R, H, 2 * F
    A = [torch.randn(M, K, device=dev).to(torch.bfloat16) for _ in range(E)]
    B = [torch.randn(N, K, device=dev).to(torch.bfloat16) for _ in range(E)]
    C = [torch.empty(M, N, device=dev, dtype=torch.bfloat16) for _ in range(E)]
    if fp8:
        A = [a.to(torch.float8_e4m3fn) for a in A]; B = [b.to(torch.float8_e4m3fn) for b in B]
        one = torch.ones((), device=dev)
        def gemm(e): torch._scaled_mm(A[e], B[e].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=C[e])
    else:
        def gemm(e): torch.mm(A[e], B[e].t(), out=C[e])
    return gemm

def spread(fn_e, pre=None):
    cur = torch.cuda.current_stream()
    for s in S: s.wait_stream(cur)
    for e in range(E):
        with torch.cuda.stream(S[e % 4]):
            if pre: pre(e)
            fn_e(e)
    for s in S: cur.wait_stream(s)

for fp8 in (False, True):
    for kind in ('wgrad_out', 'dgrad_x'):
        gemm = make_gemms(kind, fp8)
        t_g = timeit(lambda: spread(gemm))
        t_m = timeit(mem_all)
        t_ser = timeit(lambda: (mem_all(), spread(gemm)))
        def side():
            cur = torch.cuda.current_stream(); memS.wait_stream(cur)
            with torch.cuda.stream(memS): mem_all()
            spread(gemm); cur.wait_stream(memS)
        t_side = timeit(side)
        t_chain = timeit(lambda: spread(gemm, pre=mem_piece))
        print(f"{'fp8 ' if fp8 else 'bf16'} {kind:9s} gemms {t_g:.3f} mem {t_m:.3f} serial {t_ser:.3f} "
              f"mem-beside {t_side:.3f} (hid {t_ser - t_side:+.3f}) chains {t_chain:.3f} (hid {t_ser - t_chain:+.3f})", flush=True)
