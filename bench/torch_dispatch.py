"""PyTorch eager counterpart of bench/torch-dispatch.ts: the same loops, same sizes.

    python3 bench/torch_dispatch.py [cpu|cuda] [--iters N]
"""
import json
import sys
import time

import torch

device = "cuda" if len(sys.argv) > 1 and sys.argv[1] == "cuda" else "cpu"
iters = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 20000


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def bench(body, n=iters):
    for _ in range(min(1000, n)):
        body()
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        body()
    sync()
    return (time.perf_counter() - t0) * 1e6 / n


a = torch.randn(16, device=device)
b = torch.randn(16, device=device)
m = torch.randn(16, 16, device=device)

def chain():
    x = a
    for _ in range(10):
        x = (x * 1.0001) + b

results = {"device": device, "iters": iters, "torch": torch.__version__}
results["add_us"] = bench(lambda: a + b)


def add100():
    for _ in range(100):
        a + b


results["add_in_tidy_us"] = bench(add100, iters // 100) / 100
results["mul_scalar_us"] = bench(lambda: a * 2)
results["matmul_16_us"] = bench(lambda: m @ m)
results["softmax_us"] = bench(lambda: m.softmax(-1))
results["sum_dim_us"] = bench(lambda: m.sum(1))
results["view_us"] = bench(lambda: m.view(256))
results["add_inplace_us"] = bench(lambda: a.add_(b))
results["chain10_tidy_us"] = bench(chain, iters // 10)

if device == "cuda":
    for n in (4096, 8192):
        x = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        y = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        for _ in range(3):
            x @ y
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        reps = 20
        start.record()
        for _ in range(reps):
            x @ y
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / reps
        results[f"bf16_matmul_{n}_tflops"] = 2 * n**3 / (ms * 1e-3) / 1e12

print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()}))
