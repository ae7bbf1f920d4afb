"""GPU check of the div_trunc template (compiled Triton, not the interpreter): integer and float operands."""
import torch, triton, triton.language as tl
from drtriton.ops import get
src = "import triton\nimport triton.language as tl\n\n" + get("div_trunc").triton_helpers[0] + "\n"
import tempfile, importlib.util, os
d = tempfile.mkdtemp(); p = os.path.join(d, "k.py")
open(p, "w").write(src + '''
@triton.jit
def k(X, Y, O, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(O + offs, _div_trunc(tl.load(X + offs, mask=m), tl.load(Y + offs, mask=m, other=1)), mask=m)

@triton.jit
def k3(X, O, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(O + offs, _div_trunc(tl.load(X + offs, mask=m), -3), mask=m)
''')
spec = importlib.util.spec_from_file_location("k", p); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
n = 5000
for dt in (torch.int64, torch.int32):
    x = torch.randint(-10**6, 10**6, (n,), device="cuda", dtype=dt)
    y = torch.randint(1, 1000, (n,), device="cuda", dtype=dt) * (torch.randint(0, 2, (n,), device="cuda", dtype=dt) * 2 - 1)
    o = torch.empty_like(x); mod.k[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
    print(dt, "tensor", torch.equal(o, torch.div(x, y, rounding_mode="trunc")))
    o = torch.empty_like(x); mod.k3[(triton.cdiv(n, 1024),)](x, o, n, BLOCK=1024)
    print(dt, "by -3", torch.equal(o, torch.div(x, -3, rounding_mode="trunc")))
x = torch.randn(n, device="cuda") * 100; y = torch.randn(n, device="cuda").abs() + 0.5
o = torch.empty_like(x); mod.k[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
print("float32", torch.equal(o, torch.div(x, y, rounding_mode="trunc")))
