"""GPU check of the zeta and polygamma templates (compiled Triton, not the interpreter) against torch."""
import importlib.util, os, tempfile
import torch, triton
from drtriton import ops
exprs = {"zeta": ops.get("zeta").triton_expr({}), **{f"polygamma{n}": ops.get("polygamma").triton_expr({"n": n}) for n in (1, 2, 3, 4)}}
src = "import triton\nimport triton.language as tl\n\n" + "\n\n".join(ops.called_helpers(" ".join(exprs.values()))) + "\n"
for name, e in exprs.items():
    src += f'''
@triton.jit
def k_{name}(X, Y, O, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m, other=2.0)
    y = tl.load(Y + offs, mask=m, other=1.0)
    tl.store(O + offs, {e.format(x="x", y="y")}, mask=m)
'''
p = os.path.join(tempfile.mkdtemp(), "k.py"); open(p, "w").write(src)
spec = importlib.util.spec_from_file_location("k", p); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
n = 4096
g = torch.Generator().manual_seed(0)
x = torch.rand(n, generator=g) * 8 + 1.001
q = torch.cat([torch.rand(n - 16, generator=g) * 10 + 1e-3, torch.tensor([0.0, -2.0, -1.5, -2.5, 1.0, 2.0, 3.0, 4.0] * 2)])
xs = torch.cat([x[:-16], torch.tensor([2.0, 3.0, 2.0, 4.0, 1.0, 0.5, 2.5, 3.0] * 2)])
xp = torch.randn(n, generator=g) * 4
for name in exprs:
    a, b = (xs, q) if name == "zeta" else (xp, xp)
    ref = torch.special.zeta(a, b) if name == "zeta" else torch.polygamma(int(name[-1]), a)
    o = torch.empty(n, device="cuda")
    getattr(mod, f"k_{name}")[(triton.cdiv(n, 1024),)](a.cuda(), b.cuda(), o, n, BLOCK=1024)
    ok = torch.allclose(o.cpu(), ref, rtol=1e-4, atol=1e-5, equal_nan=True)
    bad = (~torch.isclose(o.cpu(), ref, rtol=1e-4, atol=1e-5, equal_nan=True)).sum().item()
    print(name, "allclose" if ok else f"MISMATCH {bad} of {n}", flush=True)
a = xp
ref32 = torch.polygamma(1, a); ref64 = torch.polygamma(1, a.double())
o = torch.empty(n, device="cuda"); mod.k_polygamma1[(triton.cdiv(n, 1024),)](a.cuda(), a.cuda(), o, n, BLOCK=1024)
bad = ~torch.isclose(o.cpu(), ref32, rtol=1e-4, atol=1e-5, equal_nan=True)
for i in bad.nonzero().flatten().tolist():
    print(f"x={a[i].item()!r} ours={o[i].item()!r} torch32={ref32[i].item()!r} torch64={ref64[i].item()!r}")
