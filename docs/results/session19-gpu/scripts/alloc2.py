"""Host cost of allocation forms, loop and timer regimes (session 19, call D)."""
import statistics, time, sys
import torch
sys.path.insert(0, ".")
from drtriton.verify.worker.timing import time_interleaved

def host_us(fn, n=3000, rounds=5):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n): fn()
        out.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)

def strides(shape):
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]

f32 = torch.float32
for shape in ((4096,), (64, 128), (8, 64, 16, 16)):
    x = torch.randn(shape, device="cuda")
    dev, sh = x.device, x.shape
    cases = {
        "nothing": lambda: None,
        "empty(shape, device=dev, dtype)": lambda: torch.empty(sh, device=dev, dtype=f32),
        "empty(shape, dtype, device=dev)": lambda: torch.empty(sh, dtype=f32, device=dev),
        "empty(*shape, device=dev, dtype)": lambda: torch.empty(*sh, device=dev, dtype=f32),
        "empty(tuple, device=dev, dtype)": lambda: torch.empty(tuple(sh), device=dev, dtype=f32),
        "empty(shape, device='cuda', dtype)": lambda: torch.empty(sh, device="cuda", dtype=f32),
        "empty(shape, ..., contiguous_format)": lambda: torch.empty(sh, device=dev, dtype=f32, memory_format=torch.contiguous_format),
        "empty_strided(shape, strides(shape))": lambda: torch.empty_strided(sh, strides(sh), device=dev, dtype=f32),
        "empty_like(x)": lambda: torch.empty_like(x),
        "empty_like(x, contiguous_format)": lambda: torch.empty_like(x, memory_format=torch.contiguous_format),
        "x.new_empty(shape)": lambda: x.new_empty(sh),
        "aten.empty.memory_format": lambda: torch.ops.aten.empty.memory_format(sh, dtype=f32, device=dev),
        "torch._C._VariableFunctions.empty": lambda: torch._C._VariableFunctions.empty(sh, device=dev, dtype=f32),
    }
    print(f"== shape {tuple(shape)}: loop us")
    for name, f in cases.items():
        print(f"  {name:40s} {host_us(f):7.2f}", flush=True)
    if len(shape) == 1:
        raw = time_interleaved({n: (lambda f: lambda inputs: f())(f) for n, f in cases.items()}, lambda n, i: [], 200, 10)
        print("  timer regime, event us:")
        for n, (t, w) in raw.items():
            print(f"  {n:40s} {statistics.median(t) * 1e3:7.1f}")
print("torch.overrides mode stack:", torch._C._is_torch_function_mode_enabled(), torch._C._get_function_stack_at(0) if torch._C._len_torch_function_stack() else None)
