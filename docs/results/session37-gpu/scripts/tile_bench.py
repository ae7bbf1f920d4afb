"""Session 37, call 1: x + y.transpose(1, 2) (32 x 1024 x 512 fp32, 3 x 64 MB) as a flat tile
(today's kernel: y read 32 rows per warp) against tiles over (rows, cols) where y's contiguous
dim is the tile's first, with its stride passed as an argument (Triton specialises a 1), and
eager's add."""
import torch, triton, triton.language as tl
from triton.testing import do_bench

@triton.jit
def flat(x, y, out, n, L, C, ys0, ys1, ys2, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i2 = offs % C; i1 = (offs // C) % L; i0 = offs // (C * L)
    v = tl.load(x + offs, mask=mask) + tl.load(y + i0 * ys0 + i1 * ys1 + i2 * ys2, mask=mask)
    tl.store(out + offs, v, mask=mask)

@triton.jit
def tiled(x, y, out, L, C, ys0, ys1, ys2, BT: tl.constexpr, BC: tl.constexpr):
    b = tl.program_id(0)
    it = tl.program_id(1) * BT + tl.arange(0, BT)[:, None]
    ic = tl.program_id(2) * BC + tl.arange(0, BC)[None, :]
    mask = (it < L) & (ic < C)
    offs = b * L * C + it * C + ic
    v = tl.load(x + offs, mask=mask) + tl.load(y + b * ys0 + it * ys1 + ic * ys2, mask=mask)
    tl.store(out + offs, v, mask=mask)

B, L, C = 32, 1024, 512
x = torch.randn(B, L, C, device="cuda"); y = torch.randn(B, C, L, device="cuda"); yt = y.transpose(1, 2)
ref = x + yt
out = torch.empty_like(x)
gb = 3 * x.numel() * 4 / 1e9
def report(name, fn):
    fn(); torch.cuda.synchronize()
    assert torch.equal(out, ref), name
    ms = do_bench(fn, warmup=25, rep=200)
    print(f"{name:28s} {ms * 1e3:7.1f} us  {gb / ms * 1e3:6.0f} GB/s", flush=True)
report("eager x + y.t", lambda: torch.add(x, yt, out=out))
report("flat 1024 w4", lambda: flat[(triton.cdiv(x.numel(), 1024),)](x, yt, out, x.numel(), L, C, *yt.stride(), BLOCK=1024, num_warps=4))
for bt, bc, w in [(32, 32, 4), (64, 64, 4), (64, 64, 8), (32, 128, 4), (128, 32, 4), (64, 128, 8), (128, 128, 8), (16, 256, 4)]:
    report(f"tiled {bt}x{bc} w{w}", lambda bt=bt, bc=bc, w=w: tiled[(B, triton.cdiv(L, bt), triton.cdiv(C, bc))](x, yt, out, L, C, *yt.stride(), BT=bt, BC=bc, num_warps=w))
# the same tile over a contiguous y (no transpose): what a tile costs where the flat one is right
y2 = torch.randn(B, L, C, device="cuda"); ref = x + y2
report("flat, y contiguous", lambda: flat[(triton.cdiv(x.numel(), 1024),)](x, y2, out, x.numel(), L, C, *y2.stride(), BLOCK=1024, num_warps=4))
report("tiled 64x64, y contiguous", lambda: tiled[(B, triton.cdiv(L, 64), triton.cdiv(C, 64))](x, y2, out, L, C, *y2.stride(), BT=64, BC=64, num_warps=4))
