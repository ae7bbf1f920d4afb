"""Session 32, call 1: why 3x3 implicit-GEMM convolutions run at ~15% of the tf32x3 tensor-core
rate. Variants of the template's kernel (one kernel, runtime sizes, so one compile serves every
shape): NEST = taps static, channels in a loop (the template now: a 2-trip loop for 64 channels,
which the software pipeliner cannot overlap), else one flattened (tap, channel-block) loop as
Inductor's; XL = x read channels-last (the channel axis contiguous: K-major A); WK = weight read
as [taps, OC, C] (K-major B) instead of [taps, C, OC]. Each beside cuDNN fp32 and TF32, medians of
do_bench (L2 flushed). Prints JSON lines."""
import json, os, sys, itertools, time
import torch, triton, triton.language as tl
from triton.testing import do_bench
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
INTERP = os.environ.get("TRITON_INTERPRET") == "1"
DEV = "cpu" if INTERP else "cuda"


@triton.jit(do_not_specialize=["H", "W", "OH", "OW", "SH", "SW", "PH", "PW"])
def conv(x, w, out, C, H, W, OC, OH, OW, SH, SW, PH, PW,
         KH: tl.constexpr, KW: tl.constexpr, NEST: tl.constexpr, XL: tl.constexpr, WK: tl.constexpr,
         PREC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(OH * OW, BLOCK_M)
    num_n = tl.cdiv(OC, BLOCK_N)
    pid_n = pid % num_n
    pid_m = (pid // num_n) % num_m
    n = pid // (num_n * num_m)
    q = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q_ok = q < OH * OW
    oh = q // OW
    ow = q % OW
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    oc = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    oc_ok = oc < OC
    x_img = x + n.to(tl.int64) * C * H * W
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if NEST:
        for tap in tl.static_range(0, KH * KW):
            kh = tap // KW
            kw = tap % KW
            ih = ih0 + kh
            iw = iw0 + kw
            ok = q_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            for c0 in range(0, C, BLOCK_K):
                c = c0 + tl.arange(0, BLOCK_K)
                c_ok = c < C
                if XL:
                    xv = tl.load(x_img + ((ih * W + iw) * C)[:, None] + c[None, :], mask=ok[:, None] & c_ok[None, :], other=0.0)
                else:
                    xv = tl.load(x_img + (ih * W + iw)[:, None] + (c * (H * W))[None, :], mask=ok[:, None] & c_ok[None, :], other=0.0)
                if WK:
                    wv = tl.load(w + (tap * OC + oc)[None, :] * C + c[:, None], mask=c_ok[:, None] & oc_ok[None, :], other=0.0)
                else:
                    wv = tl.load(w + (tap * C + c)[:, None] * OC + oc[None, :], mask=c_ok[:, None] & oc_ok[None, :], other=0.0)
                acc += tl.dot(xv, wv, input_precision=PREC)
    else:
        kc = tl.cdiv(C, BLOCK_K)
        for kk in range(0, KH * KW * kc):
            tap = kk // kc
            c0 = (kk - tap * kc) * BLOCK_K
            kh = tap // KW
            kw = tap - kh * KW
            ih = ih0 + kh
            iw = iw0 + kw
            ok = q_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            c = c0 + tl.arange(0, BLOCK_K)
            c_ok = c < C
            if XL:
                xv = tl.load(x_img + ((ih * W + iw) * C)[:, None] + c[None, :], mask=ok[:, None] & c_ok[None, :], other=0.0)
            else:
                xv = tl.load(x_img + (ih * W + iw)[:, None] + (c * (H * W))[None, :], mask=ok[:, None] & c_ok[None, :], other=0.0)
            if WK:
                wv = tl.load(w + (tap * OC + oc)[None, :] * C + c[:, None], mask=c_ok[:, None] & oc_ok[None, :], other=0.0)
            else:
                wv = tl.load(w + (tap * C + c)[:, None] * OC + oc[None, :], mask=c_ok[:, None] & oc_ok[None, :], other=0.0)
            acc += tl.dot(xv, wv, input_precision=PREC)
    o = out + n.to(tl.int64) * OC * OH * OW + (oc * (OH * OW))[None, :] + q[:, None]
    tl.store(o, acc, mask=q_ok[:, None] & oc_ok[None, :])


def run(x, weight, stride, pad, variant, cfg, prec):
    N, C, H, W = x.shape
    OC, _, KH, KW = weight.shape
    OH = (H + 2 * pad - KH) // stride + 1
    OW = (W + 2 * pad - KW) // stride + 1
    nest, xl, wk = variant
    xin = x.permute(0, 2, 3, 1).contiguous() if xl else x
    w = weight.permute(2, 3, 0, 1).contiguous() if wk else weight.permute(2, 3, 1, 0).contiguous()
    out = torch.empty(N, OC, OH, OW, device=x.device)
    bm, bn, bk, warps, stages = cfg
    grid = (N * triton.cdiv(OH * OW, bm) * triton.cdiv(OC, bn),)
    kw = {} if INTERP else {"num_warps": warps, "num_stages": stages}
    fn = lambda: conv[grid](xin, w, out, C, H, W, OC, OH, OW, stride, stride, pad, pad, KH=KH, KW=KW,
                            NEST=nest, XL=xl, WK=wk, PREC=prec, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, **kw)
    return out, fn, xin, w


VARIANTS = {"nest": (True, False, False), "flat": (False, False, False), "flat_wk": (False, False, True),
            "flat_xl": (False, True, False), "flat_xl_wk": (False, True, True), "nest_xl_wk": (True, True, True)}
CONFIGS = [(128, 64, 32, 4, 3), (128, 64, 16, 4, 4), (128, 128, 32, 8, 3), (256, 64, 32, 8, 3),
           (64, 64, 32, 4, 4), (128, 64, 64, 4, 2), (64, 128, 32, 4, 3), (128, 128, 16, 8, 4)]
SHAPES = {  # name: (N, C, H, W, OC, k, stride, pad)
    "resnet3x3_64_64_56": (32, 64, 56, 56, 64, 3, 1, 1),
    "resnet3x3_512_512_7": (32, 512, 7, 7, 512, 3, 1, 1),
    "resnet3x3s2_128_256_28": (32, 128, 28, 28, 256, 3, 2, 1),
    "pixshuf3x3_64_256_128": (16, 64, 128, 128, 256, 3, 1, 1),
    "upsample3x3_128_128_128": (16, 128, 128, 128, 128, 3, 1, 1),
    "resnet3x3_256_256_14": (32, 256, 14, 14, 256, 3, 1, 1),
}

if INTERP:  # a check of every variant on small shapes, on the CPU
    torch.manual_seed(0)
    for (name, v), stride in itertools.product(VARIANTS.items(), (1, 2)):
        x = torch.randn(2, 20, 9, 7)
        wt = torch.randn(24, 20, 3, 3)
        out, fn, _, _ = run(x, wt, stride, 1, v, (16, 16, 16, 4, 1), "ieee")
        fn()
        ref = torch.nn.functional.conv2d(x, wt, stride=stride, padding=1)
        print(name, stride, (out - ref).abs().max().item())
        assert torch.allclose(out, ref, atol=1e-4, rtol=1e-4)
    sys.exit(0)

only = sys.argv[1:] or list(SHAPES)
for name in only:
    N, C, H, W, OC, k, stride, pad = SHAPES[name]
    torch.manual_seed(0)
    x = torch.randn(N, C, H, W, device="cuda")
    wt = torch.randn(OC, C, k, k, device="cuda") / (C * k * k) ** 0.5
    ref = torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad)
    flops = 2 * ref.numel() * C * k * k
    row = {"shape": name, "gflop": flops / 1e9}
    row["cudnn_fp32_ms"] = do_bench(lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad), return_mode="median")
    torch.backends.cudnn.allow_tf32 = True
    row["cudnn_tf32_ms"] = do_bench(lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad), return_mode="median")
    torch.backends.cudnn.allow_tf32 = False
    row["nchw_to_nhwc_ms"] = do_bench(lambda: x.permute(0, 2, 3, 1).contiguous(), return_mode="median")
    for (vname, v), cfg in itertools.product(VARIANTS.items(), CONFIGS):
        for prec in ("tf32x3",) if vname != "flat_xl_wk" else ("tf32x3", "tf32", "ieee"):
            key = f"{vname}/{prec}/{'x'.join(map(str, cfg))}"
            try:
                out, fn, _, _ = run(x, wt, stride, pad, v, cfg, prec)
                fn()
                torch.cuda.synchronize()
                err = (out - ref).abs().max().item()
                ms = do_bench(fn, return_mode="median")
                row[key] = [round(ms, 4), err]
            except Exception as e:  # noqa: BLE001
                row[key] = str(e)[:120]
    best = {}
    for key, val in row.items():
        if isinstance(val, list):
            vp = key.rsplit("/", 1)[0]
            if vp not in best or val[0] < best[vp][0]:
                best[vp] = [val[0], key.rsplit("/", 1)[1], round(flops / val[0] / 1e9, 1)]
    row["best"] = best
    print(json.dumps(row), flush=True)
    print(name, "cudnn fp32", round(row["cudnn_fp32_ms"], 4), "tf32", round(row["cudnn_tf32_ms"], 4),
          {k: v for k, v in best.items()}, file=sys.stderr, flush=True)
