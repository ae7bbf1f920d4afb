"""Session 31, call 1: where the implicit-GEMM and depthwise convolution templates lose to cuDNN.
Times, per shape: the built-in policy's current candidate (autotuned, and each config forced),
prototype kernel variants, eager (cuDNN fp32) and torch.compile; medians of do_bench (L2 flushed)."""
import sys, os, json, math, tempfile, importlib.util, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, os.getcwd())
import torch, triton, triton.language as tl
from triton.testing import do_bench
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

def bench(fn):
    return do_bench(fn, warmup=20, rep=80, return_mode="median")

# ---------------- prototype: implicit GEMM, per-image grid, taps outer, channels inner -------------
@triton.jit
def conv_v1(x, w, out, C: tl.constexpr, H, W, OC: tl.constexpr, OH, OW,
            KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
            WT: tl.constexpr, PREC: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    n = tl.program_id(1)
    num_n = tl.cdiv(OC, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    q = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q_ok = q < OH * OW
    oh = q // OW
    ow = q % OW
    oc = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    oc_ok = oc < OC
    xb = x + n.to(tl.int64) * (C * H * W)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for tap in tl.static_range(KH * KW):
        kh = tap // KW
        kw = tap % KW
        ih = oh * SH - PH + kh
        iw = ow * SW - PW + kw
        ok = q_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        pos = ih * W + iw
        for c0 in range(0, C, BLOCK_K):
            c = c0 + tl.arange(0, BLOCK_K)
            c_ok = c < C
            xv = tl.load(xb + pos[None, :] + (c * (H * W))[:, None], mask=ok[None, :] & c_ok[:, None], other=0.0)
            if WT:  # weight as [taps, C, OC]
                wv = tl.load(w + (tap * C + c)[None, :] * OC + oc[:, None], mask=oc_ok[:, None] & c_ok[None, :], other=0.0)
            else:
                wv = tl.load(w + oc[:, None] * (C * KH * KW) + (c * (KH * KW) + tap)[None, :], mask=oc_ok[:, None] & c_ok[None, :], other=0.0)
            acc += tl.dot(wv, xv, input_precision=PREC)
    o = out + n.to(tl.int64) * (OC * OH * OW) + (oc * (OH * OW))[:, None] + q[None, :]
    tl.store(o, acc, mask=oc_ok[:, None] & q_ok[None, :])

# ---------------- prototype v3: acc [M, N] (positions x channels), as Inductor's template --------
@triton.jit
def conv_v3(x, w, out, C: tl.constexpr, H, W, OC: tl.constexpr, OH, OW,
            KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
            WT: tl.constexpr, PREC: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    n = tl.program_id(1)
    num_n = tl.cdiv(OC, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    q = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q_ok = q < OH * OW
    oh = q // OW
    ow = q % OW
    oc = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    oc_ok = oc < OC
    xb = x + n.to(tl.int64) * (C * H * W)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for tap in tl.static_range(KH * KW):
        kh = tap // KW
        kw = tap % KW
        ih = oh * SH - PH + kh
        iw = ow * SW - PW + kw
        ok = q_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        pos = ih * W + iw
        for c0 in range(0, C, BLOCK_K):
            c = c0 + tl.arange(0, BLOCK_K)
            c_ok = c < C
            xv = tl.load(xb + pos[:, None] + (c * (H * W))[None, :], mask=ok[:, None] & c_ok[None, :], other=0.0)
            wv = tl.load(w + (tap * C + c)[:, None] * OC + oc[None, :], mask=c_ok[:, None] & oc_ok[None, :], other=0.0)
            acc += tl.dot(xv, wv, input_precision=PREC)
    o = out + n.to(tl.int64) * (OC * OH * OW) + (oc * (OH * OW))[None, :] + q[:, None]
    tl.store(o, acc, mask=q_ok[:, None] & oc_ok[None, :])

# ---------------- depthwise prototype: a program per (plane, block of positions) ---------------
@triton.jit
def dw_v1(x, w, out, C: tl.constexpr, H, W, OH, OW, KH: tl.constexpr, KW: tl.constexpr,
          SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, BLOCK_M: tl.constexpr):
    plane = tl.program_id(1)  # n * C + c
    c = plane % C
    q = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    q_ok = q < OH * OW
    oh = q // OW
    ow = q % OW
    xb = x + plane.to(tl.int64) * (H * W)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for tap in tl.static_range(KH * KW):
        kh = tap // KW
        kw = tap % KW
        ih = oh * SH - PH + kh
        iw = ow * SW - PW + kw
        ok = q_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        wv = tl.load(w + c * (KH * KW) + tap)
        acc += wv * tl.load(xb + ih * W + iw, mask=ok, other=0.0)
    tl.store(out + plane.to(tl.int64) * (OH * OW) + q, acc, mask=q_ok)

# 2-D tile: BH rows x BW columns of one plane (the column index needs no division)
@triton.jit
def dw_v2(x, w, out, C: tl.constexpr, H, W, OH, OW, KH: tl.constexpr, KW: tl.constexpr,
          SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(2)
    c = plane % C
    oh = tl.program_id(1) * BH + tl.arange(0, BH)
    ow = tl.program_id(0) * BW + tl.arange(0, BW)
    xb = x + plane.to(tl.int64) * (H * W)
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for tap in tl.static_range(KH * KW):
        kh = tap // KW
        kw = tap % KW
        ih = oh * SH - PH + kh
        iw = ow * SW - PW + kw
        ok = ((ih >= 0) & (ih < H))[:, None] & ((iw >= 0) & (iw < W))[None, :]
        wv = tl.load(w + c * (KH * KW) + tap)
        acc += wv * tl.load(xb + (ih * W)[:, None] + iw[None, :], mask=ok, other=0.0)
    tl.store(out + plane.to(tl.int64) * (OH * OW) + (oh * OW)[:, None] + ow[None, :], acc,
             mask=(oh < OH)[:, None] & (ow < OW)[None, :])

SHAPES = [  # name, N, C, H, W, OC, k, stride, pad, groups
    ("expand1x1_64_256_56", 16, 64, 56, 56, 256, 1, 1, 0, 1),
    ("project1x1_256_64_56", 16, 256, 56, 56, 64, 1, 1, 0, 1),
    ("pixshuf3x3_64_256_128", 16, 64, 128, 128, 256, 3, 1, 1, 1),
    ("upsample3x3_128_128_128", 16, 128, 128, 128, 128, 3, 1, 1, 1),
    ("resnet3x3_64_64_56", 32, 64, 56, 56, 64, 3, 1, 1, 1),
    ("resnet3x3s2_128_256_28", 32, 128, 28, 28, 256, 3, 2, 1, 1),
    ("stem3x3_3_64_56", 16, 3, 56, 56, 64, 3, 1, 1, 1),
    ("dw3x3_256_56", 16, 256, 56, 56, 256, 3, 1, 1, 256),
    ("dw3x3s2_96_112", 32, 96, 112, 112, 96, 3, 2, 1, 96),
]
GEMM_CFGS = [(128, 64, 32, 4, 3), (128, 128, 32, 8, 3), (64, 64, 32, 4, 4), (256, 64, 32, 8, 3), (128, 64, 16, 4, 4),
             (64, 128, 32, 4, 3), (128, 256, 32, 8, 3), (128, 128, 64, 8, 3)]

def problem_source(N, C, H, W, OC, k, s, p, g):
    return f'''import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d({C}, {OC}, {k}, stride={s}, padding={p}, groups={g}, bias=False)
    def forward(self, x):
        return self.conv(x)
def get_inputs(): return [torch.randn({N}, {C}, {H}, {W})]
def get_init_inputs(): return []
'''

def current_candidate(src, tag, folder):
    from drtriton.capture import capture_module
    from drtriton.policy.builtin import BuiltinPolicy
    from drtriton.problem import from_source
    ns = {}
    exec(src, ns)
    with torch.device("meta"):
        g = capture_module(ns["Model"](), [a.to("meta") for a in ns["get_inputs"]()])
    prob = from_source(src, "Model", name=tag)
    out = []
    for cand in BuiltinPolicy("cuda").candidates(prob, g, "strict"):
        out.append(cand)
        if len(out) >= 2:
            break
    mods = []
    for i, cand in enumerate(out):
        path = os.path.join(folder, f"{tag}_{i}.py")
        open(path, "w").write(cand.source)
        spec = importlib.util.spec_from_file_location(f"{tag}_{i}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append((cand.plan, mod))
    return mods

def main():
    folder = tempfile.mkdtemp()
    res = {}
    torch.manual_seed(0)
    for (name, N, C, H, W, OC, k, s, p, g) in SHAPES:
        r = res[name] = {}
        conv = torch.nn.Conv2d(C, OC, k, stride=s, padding=p, groups=g, bias=False).cuda()
        x = torch.randn(N, C, H, W, device="cuda")
        OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
        flops = 2 * N * OC * OH * OW * (C // g) * k * k
        nbytes = 4 * (x.numel() + N * OC * OH * OW + conv.weight.numel())
        r["gflop"], r["mb"] = flops / 1e9, nbytes / 1e6
        with torch.no_grad():
            ref = torch.nn.functional.conv2d(x.double(), conv.weight.double(), stride=s, padding=p, groups=g).float()
            r["eager"] = bench(lambda: conv(x))
            cmp = torch.compile(conv)
            cmp(x)
            r["compile"] = bench(lambda: cmp(x))
            try:
                for i, (plan, mod) in enumerate(current_candidate(problem_source(N, C, H, W, OC, k, s, p, g), name, folder)):
                    m = mod.ModelNew().cuda()
                    m.load_state_dict(conv.state_dict())
                    y = m(x)
                    err = ((y - ref).abs().max() / ref.abs().max()).item()
                    r[f"current{i}"] = (bench(lambda: m(x)), plan, err)
                    kern = [v for v in vars(mod).values() if isinstance(v, triton.runtime.Autotuner)]
                    if kern:
                        r[f"current{i}_best"] = str(kern[0].best_config)
            except Exception as e:
                r["current_error"] = repr(e)[:300]
            def err_of(y):
                return ((y - ref).abs().max() / ref.abs().max()).item()
            out = torch.empty(N, OC, OH, OW, device="cuda")
            if g == 1:
                wt = conv.weight.permute(2, 3, 1, 0).contiguous()  # [kh, kw, C, OC]
                def sweep(kern_name, kern, useT, prec, cfgs):
                    best = None
                    wgt = wt if useT else conv.weight
                    for (bm, bn, bk, nw, ns) in cfgs:
                        bn2 = min(bn, max(16, triton.next_power_of_2(OC)))
                        bk2 = min(bk, max(16, triton.next_power_of_2(C)))
                        grid = (triton.cdiv(OH * OW, bm) * triton.cdiv(OC, bn2), N)
                        f = lambda: kern[grid](x, wgt, out, C, H, W, OC, OH, OW, k, k, s, s, p, p, useT, prec,
                                               BLOCK_M=bm, BLOCK_N=bn2, BLOCK_K=bk2, num_warps=nw, num_stages=ns)
                        try:
                            f()
                            e = err_of(out)
                            t = bench(f)
                        except Exception as ex:
                            r.setdefault("errors", []).append(f"{kern_name} {prec} {(bm, bn2, bk2, nw, ns)}: {repr(ex)[:200]}")
                            continue
                        if best is None or t < best[0]:
                            best = (t, (bm, bn, bk, nw, ns), e)
                    r[f"{kern_name}_{prec}"] = best
                    return best
                CFGS = GEMM_CFGS[:5]
                b1 = sweep("v1wt", conv_v1, True, "tf32x3", CFGS)
                b3 = sweep("v3", conv_v3, True, "tf32x3", CFGS)
                if b1:
                    sweep("v1", conv_v1, False, "tf32x3", [b1[1]])
                if b3:
                    sweep("v3", conv_v3, True, "ieee", [b3[1]])
                    sweep("v3", conv_v3, True, "tf32", [b3[1]])
            else:
                best = None
                for bm, nw in ((256, 4), (512, 4), (1024, 4), (1024, 8), (2048, 8)):
                    grid = (triton.cdiv(OH * OW, bm), N * C)
                    f = lambda: dw_v1[grid](x, conv.weight, out, C, H, W, OH, OW, k, k, s, s, p, p, BLOCK_M=bm, num_warps=nw)
                    f(); e = err_of(out); t = bench(f)
                    if best is None or t < best[0]:
                        best = (t, (bm, nw), e)
                r["dw_v1"] = best
                best = None
                for bh, bw, nw in ((8, 64, 4), (16, 64, 4), (4, 64, 4), (8, 32, 4), (16, 32, 4), (32, 64, 8), (8, 128, 4)):
                    grid = (triton.cdiv(OW, bw), triton.cdiv(OH, bh), N * C)
                    f = lambda: dw_v2[grid](x, conv.weight, out, C, H, W, OH, OW, k, k, s, s, p, p, BH=bh, BW=bw, num_warps=nw)
                    f(); e = err_of(out); t = bench(f)
                    if best is None or t < best[0]:
                        best = (t, (bh, bw, nw), e)
                r["dw_v2"] = best
        print(name, json.dumps(r), flush=True)
    json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "conv_proto.json"), "w"), indent=1)

main()
