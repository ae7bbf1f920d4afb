"""Where a timed one-kernel call's event time goes (session 19, call C): the verifier's timer
(time_interleaved: sync, event, call, sync, event) over the parts of a generated add of 4,096 floats."""
import statistics, sys
import torch, triton, triton.language as tl
sys.path.insert(0, ".")
from drtriton.policy.launch import DirectLaunch
from drtriton.verify.worker.timing import time_interleaved

@triton.jit
def add_kernel(x_ptr, y_ptr, add_out, n, WIDE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(add_out + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

direct = DirectLaunch(add_kernel)

class Eager(torch.nn.Module):
    def forward(self, x, y):
        return x + y

class Triton(torch.nn.Module):
    def forward(self, x, y):
        add = torch.empty(x.shape, device=x.device, dtype=torch.float32)
        add_kernel[(4,)](x.contiguous(), y.contiguous(), add, add.numel(), WIDE=False, BLOCK=1024, num_warps=4)
        return add

class Direct(torch.nn.Module):
    def forward(self, x, y):
        add = torch.empty(x.shape, device=x.device, dtype=torch.float32)
        direct[(4,)](x.contiguous(), y.contiguous(), add, add.numel(), WIDE=False, BLOCK=1024, num_warps=4)
        return add

class DirectLike(torch.nn.Module):
    def forward(self, x, y):
        add = torch.empty_like(x)
        direct[(4,)](x.contiguous(), y.contiguous(), add, add.numel(), WIDE=False, BLOCK=1024, num_warps=4)
        return add

x = torch.randn(4096, device="cuda"); y = torch.randn(4096, device="cuda"); out = torch.empty_like(x)
for _ in range(3):
    direct[(4,)](x, y, out, 4096, WIDE=False, BLOCK=1024, num_warps=4)
entry = next(iter(direct.launches.values()))
_, dev_fn, stream_fn, run, function, metadata, tail, _ = entry
mods = {"eager module": Eager(), "triton module": Triton(), "direct module": Direct(), "direct empty_like": DirectLike()}
fns = {name: (lambda m: lambda inputs: m(*inputs))(m) for name, m in mods.items()}
fns.update({
    "nothing": lambda inputs: None,
    "eager x+y": lambda inputs: inputs[0] + inputs[1],
    "torch.empty": lambda inputs: torch.empty(x.shape, device=x.device, dtype=torch.float32),
    "kernel[grid] prealloc": lambda inputs: add_kernel[(4,)](x, y, out, 4096, WIDE=False, BLOCK=1024, num_warps=4),
    "DirectLaunch prealloc": lambda inputs: direct[(4,)](x, y, out, 4096, WIDE=False, BLOCK=1024, num_warps=4),
    "compiled.run prealloc": lambda inputs: run(4, 1, 1, stream_fn(dev_fn()), function, metadata, None, None, None, x, y, out, 4096, *tail),
})
with torch.no_grad():
    for rnd in range(2):
        raw = time_interleaved(fns, lambda name, i: [x, y], 300, 10)
        print(f"round {rnd}: median event us / host wall us")
        for name, (t, w) in raw.items():
            print(f"  {name:24s} {statistics.median(t) * 1e3:8.1f} {statistics.median(w) * 1e3:8.1f}")
