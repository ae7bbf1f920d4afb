"""Session 19 call A: where a one-kernel forward's host time goes, and a direct-launch prototype."""
import inspect, time, statistics, sys
import torch, triton, triton.language as tl
from triton.compiler.compiler import CompiledKernel
from triton.runtime.jit import JITFunction
print("triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name())
print("run is property:", isinstance(inspect.getattr_static(CompiledKernel, "run"), property))
src = inspect.getsource(JITFunction.run)
print(src[src.find("if not warmup"):][:900])
print(inspect.getsource(CompiledKernel.__getitem__))
launcher = triton.runtime.driver.active.launcher_cls
print(launcher, inspect.getsource(launcher.__call__)[:1500])

def _cdiv(a, b):
    return -(-a // b)

@triton.jit
def add_kernel(x_ptr, y_ptr, add_out, n, WIDE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x_val = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y_val = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(add_out + offs, x_val + y_val, mask=mask)

_device = triton.runtime.driver.active.get_current_device
_stream = triton.runtime.driver.active.get_current_stream

class Launcher:
    __slots__ = ("kernel", "signature", "compiled")
    def __init__(self, kernel):
        self.kernel, self.signature, self.compiled = kernel, inspect.signature(kernel.fn), {}
    def __call__(self, grid, *args, **kwargs):
        device = _device()
        key = (device, tuple(kwargs.values()), *[(a.dtype, a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor) else (float if isinstance(a, float) else a) for a in args])
        hit = self.compiled.get(key)
        if hit is None:
            compiled = self.kernel.warmup(*args, grid=grid, **kwargs)
            params = {k: v for k, v in kwargs.items() if k in self.signature.parameters}
            bound = self.signature.bind(*args, **params); bound.apply_defaults()
            hit = self.compiled[key] = (compiled.run, compiled.function, compiled.packed_metadata, tuple(bound.arguments.values())[len(args):])
        run, function, metadata, tail = hit
        gx, gy, gz = (*grid, 1, 1)[:3]
        run(gx, gy, gz, _stream(device), function, metadata, None, None, None, *args, *tail)

add_direct = Launcher(add_kernel)

class Gen(torch.nn.Module):
    def forward(self, x, y):
        add = torch.empty(x.shape, device=x.device, dtype=torch.float32)
        _x = x.contiguous(); _y = y.contiguous(); _n = add.numel()
        add_kernel[(_cdiv(_n, 1024),)](_x, _y, add, _n, WIDE=_n > 2**30, BLOCK=1024, num_warps=4)
        return add

class Direct(torch.nn.Module):
    def forward(self, x, y):
        add = torch.empty(x.shape, device=x.device, dtype=torch.float32)
        _x = x.contiguous(); _y = y.contiguous(); _n = add.numel()
        add_direct((_cdiv(_n, 1024),), _x, _y, add, _n, WIDE=_n > 2**30, BLOCK=1024, num_warps=4)
        return add

class Eager(torch.nn.Module):
    def forward(self, x, y):
        return x + y

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

def synced_us(fn, n=2000):
    for _ in range(100): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e6)
    return statistics.median(ts)

for numel in (4096, 1 << 22):
    x = torch.randn(numel, device="cuda"); y = torch.randn(numel, device="cuda"); out = torch.empty_like(x)
    for m in (Gen(), Direct()):
        torch.testing.assert_close(m(x, y), x + y)
    # misaligned views must still be right (the key sees alignment)
    xs = torch.randn(numel + 1, device="cuda")[1:]; torch.testing.assert_close(Direct()(xs, y), xs + y)
    compiled = add_kernel.warmup(x, y, out, numel, grid=(_cdiv(numel, 1024),), WIDE=False, BLOCK=1024, num_warps=4)
    run, fn, md = compiled.run, compiled.function, compiled.packed_metadata
    g = (_cdiv(numel, 1024),)
    cases = {
        "eager x+y": lambda: x + y,
        "torch.empty": lambda: torch.empty(x.shape, device=x.device, dtype=torch.float32),
        "x.contiguous()": lambda: x.contiguous(),
        "stream+device": lambda: _stream(_device()),
        "kernel[grid](...) prealloc": lambda: add_kernel[g](x, y, out, numel, WIDE=False, BLOCK=1024, num_warps=4),
        "Launcher(...) prealloc": lambda: add_direct(g, x, y, out, numel, WIDE=False, BLOCK=1024, num_warps=4),
        "compiled.run raw": lambda: run(g[0], 1, 1, _stream(_device()), fn, md, None, None, None, x, y, out, numel, False, 1024),
        "module eager": (lambda m: lambda: m(x, y))(Eager()),
        "module generated": (lambda m: lambda: m(x, y))(Gen()),
        "module direct": (lambda m: lambda: m(x, y))(Direct()),
    }
    print(f"\n== numel {numel}")
    for name, f in cases.items():
        print(f"{name:30s} host {host_us(f):7.2f} us   synced {synced_us(f):7.2f} us", flush=True)
