# Throwaway: what cuBLAS reaches in fp32 (no TF32) on the router backward's shapes.
import torch, sys
torch.backends.cuda.matmul.allow_tf32 = False
for name, T, H, E in [("deepseek", 4096, 7168, 256), ("qwen", 4096, 2048, 128), ("mixtral", 4096, 4096, 8)]:
    x = torch.randn(T, H, device="cuda"); dl = torch.randn(T, E, device="cuda"); w = torch.randn(H, E, device="cuda")
    def t(f, n=20):
        for _ in range(3): f()
        s, e = torch.cuda.Event(True), torch.cuda.Event(True); s.record()
        for _ in range(n): f()
        e.record(); torch.cuda.synchronize(); return s.elapsed_time(e) / n
    a = t(lambda: dl @ w.T); b = t(lambda: x.T @ dl)
    print(f"{name}: dx = dlogits @ w^T {a*1e3:.0f} us ({2*T*H*E/a/1e9:.1f} TFLOP/s), dW = x^T @ dlogits {b*1e3:.0f} us ({2*T*H*E/b/1e9:.1f} TFLOP/s)")
