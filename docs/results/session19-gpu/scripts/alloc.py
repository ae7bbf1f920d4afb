"""Host cost of allocation forms and of DirectLaunch against Triton's launch (session 19, call B)."""
import statistics, time, sys
import torch, triton, triton.language as tl
sys.path.insert(0, ".")
from drtriton.policy.launch import DirectLaunch

@triton.jit
def add_kernel(x_ptr, y_ptr, add_out, n, WIDE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(add_out + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

direct = DirectLaunch(add_kernel)

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

x = torch.randn(4096, device="cuda"); y = torch.randn(4096, device="cuda"); out = torch.empty_like(x)
dev = x.device
shape = x.shape
cases = {
    "eager x+y": lambda: x + y,
    "torch.empty(x.shape, device=x.device, dtype=f32)": lambda: torch.empty(x.shape, device=x.device, dtype=torch.float32),
    "torch.empty(shape, device=dev, dtype=f32)": lambda: torch.empty(shape, device=dev, dtype=torch.float32),
    "torch.empty(shape, device='cuda')": lambda: torch.empty(shape, device="cuda"),
    "torch.empty_like(x)": lambda: torch.empty_like(x),
    "x.new_empty(shape)": lambda: x.new_empty(shape),
    "x.new_empty(shape, dtype=f32)": lambda: x.new_empty(shape, dtype=torch.float32),
    "torch.empty_strided(shape,(1,),device=dev)": lambda: torch.empty_strided(shape, (1,), device=dev),
    "x.device": lambda: x.device,
    "kernel[grid]": lambda: add_kernel[(4,)](x, y, out, 4096, WIDE=False, BLOCK=1024, num_warps=4),
    "DirectLaunch[grid]": lambda: direct[(4,)](x, y, out, 4096, WIDE=False, BLOCK=1024, num_warps=4),
}
direct[(4,)](x, y, out, 4096, WIDE=False, BLOCK=1024, num_warps=4)
direct[(4,)](x, y, out, 4096, WIDE=False, BLOCK=1024, num_warps=4)
torch.testing.assert_close(out, x + y)
print("direct entries:", [len(e) for e in direct.launches.values()])
for name, f in cases.items():
    print(f"{name:50s} {host_us(f):7.2f} us", flush=True)
