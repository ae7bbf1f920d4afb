"""Pooling: max and average pooling over 1-3 spatial dims, adaptive average pooling.

One template per family, parametrised by the number of spatial dims n. The input (contiguous)
is viewed as (P, I0, .., In-1): P planes (the batch and channel dims) of n spatial dims; the
output as (P, O0, .., On-1). The pooled values go through a fused epilogue before one store.

- max/avg pooling (a fixed window: kernel size, stride, padding and dilation are module
  constants baked into the kernel): a program owns one plane (and, in 3-D, one output depth) and
  a (BLOCK_H, BLOCK_W) tile of the last two output dims, so output coordinates come from the
  program ids and aranges with no per-element division. The window is unrolled at compile time:
  each position is one masked load of the whole tile at a shifted offset, coalesced along W.
- adaptive average pooling: output o along a dim of size I pools [floor(o I / O), ceil((o+1) I / O)),
  windows of varying, often large size (global pooling: the whole plane). A program owns
  BLOCK_O outputs and a (BLOCK_O, BLOCK_K) tile whose second axis walks the flattened window:
  BLOCK_K consecutive input elements of one window per step, coalesced. The launcher computes
  the largest window per dim.
Output sizes are computed in the launcher from the input shape with PyTorch's formulas
(ceil_mode included), so the module works at any input size.
"""

from __future__ import annotations

import math

from ...ops.elementwise import PROPAGATE_NAN
from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, affine, autotune, empty, input_launch, paren, pow2, stored_values

MAX_OPS = {"max_pool1d": 1, "max_pool2d": 2, "max_pool3d": 3}
AVG_OPS = {"avg_pool1d": 1, "avg_pool2d": 2, "avg_pool3d": 3}
ADAPTIVE_OPS = {"adaptive_avg_pool2d": 2, "adaptive_avg_pool3d": 3}
#: elements of one output tile (fixed windows) or (BLOCK_O, BLOCK_K) tile (adaptive), with
#: num_warps: the autotuner's choices on the GPU (the first off it)
TILES = [(1024, 4), (2048, 8), (512, 4)]
ADAPTIVE_TILES = [(2048, 4), (4096, 8), (1024, 4)]
MAX_BLOCK_K = 1024
#: fixed windows up to this many positions are unrolled (static_range); larger ones loop
MAX_UNROLL = 64


def _prod(terms: list[str]) -> str:
    return terms[0] if len(terms) == 1 else f"({' * '.join(terms)})"


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op, attrs = node.op, node.attrs
    n = MAX_OPS.get(op) or AVG_OPS.get(op) or ADAPTIVE_OPS.get(op)
    if n is None:
        raise Unsupported(op)
    kind = "max" if op in MAX_OPS else ("adaptive" if op in ADAPTIVE_OPS else "avg")
    x = program.inputs_of(node)[0]
    xs = list(program.values[x].shape)
    if program.values[x].dtype != "torch.float32":
        raise Unsupported("non-fp32 input")
    if len(xs) not in (n + 1, n + 2):
        raise Unsupported(f"{op} of a rank-{len(xs)} input")
    out = node.outputs[0]
    out_shape = list(program.values[out].shape)
    # max pooling with return_indices: also where each maximum is, as a flat index into its
    # input plane (PyTorch's convention: the first maximum in window order, NaN taking over)
    idx = node.outputs[1] if kind == "max" and len(node.outputs) > 1 else None
    stores = stored_values(program, frag, out_shape)
    if kind != "adaptive":
        k, s, p = (tuple(attrs[a]) for a in ("kernel_size", "stride", "padding"))
        d = tuple(attrs.get("dilation") or (1,) * n)
        if not (len(k) == len(s) == len(p) == len(d) == n):
            raise Unsupported("kernel/stride/padding/dilation of the wrong length")
        window = math.prod(k)
    else:
        if len(attrs["output_size"]) != n or any(o is None for o in attrs["output_size"]):
            raise Unsupported("adaptive output size with None")
        # largest window at capture: sets BLOCK_K (any size works, the loop covers the window)
        window = math.prod(-(-i // o) + 1 for i, o in zip(xs[-n:], attrs["output_size"]))

    pro = PointwiseBlock(program, frag.prologue, xs, reserved={"x_ptr"})
    epi = PointwiseBlock(program, frag.epilogue, out_shape, known={out, idx} - {None},
                         reserved={"x_ptr"} | set(pro.params()))
    name = names.kernel(frag.label)
    outs = [program.expr(o) for o in stores]
    rank, orank = len(xs), len(out_shape)
    x_sizes = [f"xsize{i}" for i in range(1, rank)]
    o_sizes = [f"osize{i}" for i in range(1, orank)]
    I = [f"I{i}" for i in range(n)]
    O = [f"O{i}" for i in range(n)]
    K = [f"K{i}" for i in range(n)]  # adaptive: the largest window per dim (run time)
    params = (pro.params() if frag.prologue else ["x_ptr"]) + epi.params() + [f"{o}_out" for o in outs]
    params += ["n_out", *I, *O] + (K if kind == "adaptive" else [])  # n_out: also the autotune key
    params += (x_sizes if frag.prologue else []) + (o_sizes if frag.epilogue else [])
    acc0 = 'float("-inf")' if kind == "max" else "0.0"

    def load(offs: str, mask: str) -> list[str]:
        if not frag.prologue:
            return [f"xv = tl.load(x_ptr + {offs}, mask={mask}, other={acc0})"]
        env: dict[str, str] = {}  # the input computed from the prologue's operands as it is read
        return pro.emit(IndexSpace(rank, offs, mask, x_sizes), env) + [f"xv = tl.where({mask}, {env[x]}, {acc0})"]

    if kind == "adaptive":
        body, o_offs, o_mask = _adaptive_body(n, I, O, K, load)
        meta = "BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr"
        block_k = min(pow2(window), MAX_BLOCK_K)
        tiles = [{"BLOCK_O": max(1, t // block_k), "num_warps": w} for t, w in ADAPTIVE_TILES]
        what = f"output size {tuple(attrs['output_size'])}"
        how = ["a program per BLOCK_O outputs; their windows flattened along the second tile axis",
               "(BLOCK_K positions per step), reduced in registers"]
    else:
        body, o_offs, o_mask = _windowed_body(kind, n, k, s, p, d, I, O, load, acc0, attrs, idx is not None)
        meta = "BLOCK_W: tl.constexpr" if n == 1 else "BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr"
        bw = min(pow2(out_shape[-1]), 128)
        tiles = [{"BLOCK_W": t, "num_warps": w} if n == 1 else
                 {"BLOCK_H": max(1, t // bw), "BLOCK_W": bw, "num_warps": w} for t, w in TILES]
        what = f"kernel {k}, stride {s}, padding {p}" + (f", dilation {d}" if kind == "max" else "")
        how = [("a program per (plane, output depth)" if n == 3 else "a program per plane") + " and tile of "
               + ("BLOCK_W outputs" if n == 1 else "(BLOCK_H, BLOCK_W) outputs") + ";",
               "the window unrolled: one shifted, masked load of the tile per position"]
    env = {out: "res", **({idx: "res_i"} if idx else {})}
    body += epi.emit(IndexSpace(orank, o_offs, o_mask, o_sizes), env)
    body += [f"tl.store({o}_out + {o_offs}, {env[v]}, mask={o_mask})" for o, v in zip(outs, stores)]
    kernel = autotune(tiles, ["n_out"], device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, {meta}):",
        f"    # {op}, {what}: {how[0]}",
        f"    # {how[1]}",
        *([f"    # fused: {frag.label}"] if len(frag.nodes) > 1 else []),
        *(f"    {line}" for line in body),
    ]

    # launcher: output sizes from the input shape, with PyTorch's formulas
    lines = [f"# {frag.label}: Triton, {op}{' with a fused epilogue' if frag.epilogue else ''}"]
    pre, dev, args = input_launch(program, pro if frag.prologue else None, x)
    lines += pre
    lines.append(f"{', '.join(f'_{v}' for v in I)}, = _xs[{-n}:]")
    for i in range(n):
        if kind == "adaptive":
            lines.append(f"_O{i} = {attrs['output_size'][i]}")
            lines.append(f"_K{i} = max(-(-(o + 1) * _I{i} // _O{i}) - o * _I{i} // _O{i} for o in range(_O{i}))")
            continue
        span = d[i] * (k[i] - 1) + 1
        if attrs["ceil_mode"]:  # the last window must start inside the input or its left padding
            lines.append(f"_O{i} = {paren(affine(f'_I{i}', 1, 2 * p[i] - span + s[i] - 1))} // {s[i]} + 1")
            lines.append(f"_O{i} -= int((_O{i} - 1) * {s[i]} >= _I{i} + {p[i]})")
        else:
            lines.append(f"_O{i} = {paren(affine(f'_I{i}', 1, 2 * p[i] - span))} // {s[i]} + 1")
    oshape = f"(*_xs[:{-n}], {', '.join(f'_O{i}' for i in range(n))})"
    for o, v in zip(outs, stores):  # each in its own dtype (the indices: int64)
        lines.append(f"{o} = {empty(oshape, len(program.values[v].shape), dev, program.values[v].dtype)}")
    pre, a = epi.launch_args(f"{outs[0]}.shape")
    lines += pre
    if kind != "adaptive":
        lines.append(f"_P = math.prod(_xs[:{-n}])  # planes")
    args += a + outs + [f"{outs[0]}.numel()"] + [f"_{v}" for v in I + O]
    if kind == "adaptive":
        args += [f"_{v}" for v in K]
    if frag.prologue:
        args.append("*_xs[1:]")
    if frag.epilogue and orank > 1:
        args.append(f"*{outs[0]}.shape[1:]")
    if kind == "adaptive":
        lines.append(f"_grid = lambda meta: (_cdiv({outs[0]}.numel(), meta['BLOCK_O']),)")
        lines.append(f"{name}[_grid]({', '.join(args)}, BLOCK_K={block_k})")
    else:  # axis 0: planes (times output depths in 3-D); axis 1: tiles of the last two output dims
        rows = "_P * _O0" if n == 3 else "_P"
        tiles_hw = "_cdiv(_O0, meta['BLOCK_W'])" if n == 1 else \
            f"_cdiv(_O{n - 2}, meta['BLOCK_H']) * _cdiv(_O{n - 1}, meta['BLOCK_W'])"
        lines.append(f"_grid = lambda meta: ({rows}, {tiles_hw})")
        lines.append(f"{name}[_grid]({', '.join(args)})")
    return Emitted(["\n".join(kernel)], lines)


def _adaptive_body(n, I, O, K, load) -> tuple[list[str], str, str]:
    """Lines computing `res` for BLOCK_O flat outputs; (lines, output offsets, output mask)."""
    body = [
        "offs = tl.program_id(0).to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)",
        "o_mask = offs < n_out",
        "# output coordinates: the plane (batch and channel dims), then one per spatial dim",
    ]
    inner: list[str] = []
    for i in reversed(range(n)):
        body.append(f"o{i} = " + (f"(offs // {_prod(inner)})" if inner else "offs") + f" % {O[i]}")
        inner.append(O[i])
    body.append(f"plane = offs // {_prod(inner)}")
    body.append(f"x_base = plane * {_prod(I)}")
    body.append("# window [floor(o I / O), ceil((o + 1) I / O)) per dim")
    for i in range(n):
        body.append(f"start{i} = (o{i} * {I[i]}) // {O[i]}")
        body.append(f"size{i} = ((o{i} + 1) * {I[i]} + {O[i]} - 1) // {O[i]} - start{i}")
    win = " * ".join(K)
    body.append("acc = tl.zeros((BLOCK_O,), tl.float32)")
    body.append(f"for k0 in range(0, {win}, BLOCK_K):")
    loop = ["k = k0 + tl.arange(0, BLOCK_K)"]
    inner = []
    for i in reversed(range(n)):  # window position -> offset along each dim, innermost last
        loop.append(f"w{i} = " + (f"(k // {_prod(inner)})" if inner else "k") + (f" % {K[i]}" if i > 0 else ""))
        inner.append(K[i])
    mask = ["o_mask[:, None]", f"(k < {win})[None, :]"]
    for i in range(n):
        loop.append(f"pos{i} = start{i}[:, None] + w{i}[None, :]")
        mask.append(f"(w{i}[None, :] < size{i}[:, None])")  # adaptive windows never leave the input
    lin = "pos0"
    for i in range(1, n):
        lin = f"({lin}) * {I[i]} + pos{i}" if i > 1 else f"{lin} * {I[i]} + pos{i}"
    loop.append("x_mask = " + " & ".join(mask))
    loop.append(f"x_offs = x_base[:, None] + {lin}")
    loop += load("x_offs", "x_mask")
    loop.append("acc += tl.sum(xv, axis=1)")
    body += [f"    {line}" for line in loop]
    body.append(f"res = acc / ({' * '.join(f'size{i}' for i in range(n))})")
    return body, "offs", "o_mask"


def _windowed_body(kind, n, k, s, p, d, I, O, load, acc0, attrs, indices=False) -> tuple[list[str], str, str]:
    """Lines computing `res` for a tile of the last two output dims (the last one in 1-D) of one
    plane (and output depth, in 3-D); (lines, output offsets, output mask). `indices` (max):
    also `res_i`, each maximum's flat index in the input plane."""
    # the tiled dims: H (n >= 2) as rows of the tile, W as its columns; D (n == 3) from the grid
    dims = {1: ["w"], 2: ["h", "w"], 3: ["d", "h", "w"]}[n]
    body = ["row = tl.program_id(0).to(tl.int64)  # plane * O0 + output depth in 3-D, else the plane"]
    if n == 1:
        body += ["ow = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)", "o_mask = ow < O0"]
    else:
        hi, wi = n - 2, n - 1
        body += [f"tiles_w = tl.cdiv({O[wi]}, BLOCK_W)",
                 "oh = (tl.program_id(1) // tiles_w) * BLOCK_H + tl.arange(0, BLOCK_H)",
                 "ow = (tl.program_id(1) % tiles_w) * BLOCK_W + tl.arange(0, BLOCK_W)",
                 f"o_mask = (oh < {O[hi]})[:, None] & (ow < {O[wi]})[None, :]"]
    if n == 3:
        body += ["od = row % O0", "x_plane = (row // O0) * I0"]
    else:
        body.append("x_plane = row" + (f" * {I[0]}" if n == 2 else ""))
    body.append("# window origins (negative inside the left padding)")
    for i, dim in enumerate(dims):
        body.append(f"{dim}0 = {affine(f'o{dim}', s[i], -p[i])}")
    acc = "(BLOCK_W,)" if n == 1 else "(BLOCK_H, BLOCK_W)"
    body.append(f"acc = tl.full({acc}, {acc0}, tl.float32)")
    if indices:  # -1 until the window's first position inside the input
        body.append(f"acc_i = tl.full({acc}, -1, tl.int64)")
    unroll = "tl.static_range" if math.prod(k) <= MAX_UNROLL else "range"
    lines, indent = [], ""
    for i, dim in enumerate(dims):  # one loop per window dim, outermost first
        lines.append(f"{indent}for k{dim} in {unroll}({k[i]}):")
        indent += "    "
        pos = f"{dim}_in"
        lines.append(f"{indent}{pos} = {dim}0 + " + affine(f"k{dim}", d[i], 0))
        lines.append(f"{indent}{dim}_ok = ({pos} >= 0) & ({pos} < {I[i]})")
        if dim == "d":
            lines.append(f"{indent}x_d = (x_plane + {pos}) * {I[1]}")
        elif dim == "h":
            base = "x_d" if n == 3 else "x_plane"
            lines.append(f"{indent}x_h = ({base} + {pos}) * {I[n - 1]}")
    base = "x_h[:, None]" if n > 1 else "x_plane * I0"
    mask = ["o_mask"] + (["d_ok"] if n == 3 else []) + (["h_ok[:, None]", "w_ok[None, :]"] if n > 1 else ["w_ok"])
    iw = "w_in[None, :]" if n > 1 else "w_in"
    lines.append(f"{indent}x_mask = {' & '.join(mask)}")
    lines.append(f"{indent}x_offs = {base} + {iw}")
    lines += [f"{indent}{line}" for line in load("x_offs", "x_mask")]
    if indices:  # as PyTorch: a greater value or a NaN takes over; the first position starts it
        spatial = ("w_in" if n == 1 else f"h_in[:, None] * {I[1]} + w_in[None, :]" if n == 2
                   else f"(d_in * {I[1]} + h_in[:, None]) * {I[2]} + w_in[None, :]")
        lines.append(f"{indent}better = x_mask & ((xv > acc) | (xv != xv) | (acc_i < 0))")
        lines.append(f"{indent}acc_i = tl.where(better, ({spatial}).to(tl.int64), acc_i)")
        lines.append(f"{indent}acc = tl.where(better, xv, acc)")
    else:
        lines.append(f"{indent}acc = tl.maximum(acc, xv{PROPAGATE_NAN})" if kind == "max" else f"{indent}acc += xv")
    body += lines
    if kind == "max":
        body.append("res = acc")
        if indices:
            body.append("res_i = acc_i")
    elif attrs.get("divisor_override"):  # PyTorch divides every window's sum by it
        body.append(f"res = acc / {float(attrs['divisor_override'])!r}  # divisor_override")
    elif (attrs["count_include_pad"] or not any(p)) and not attrs["ceil_mode"]:
        body.append(f"res = acc / {math.prod(k)}.0  # every window lies inside the (padded) input")
    else:
        # PyTorch's divisor: the window clipped to the padded input (count_include_pad) or to
        # the input itself
        parts = []
        for i, dim in enumerate(dims):
            shape = "" if n == 1 or dim == "d" else ("[:, None]" if dim == "h" else "[None, :]")
            if attrs["count_include_pad"]:
                parts.append(f"(tl.minimum({dim}0 + {k[i]}, {I[i]} + {p[i]}) - {dim}0){shape}")
            else:
                parts.append(f"(tl.minimum({dim}0 + {k[i]}, {I[i]}) - tl.maximum({dim}0, 0)){shape}")
        body.append(f"res = acc / ({' * '.join(parts)}).to(tl.float32)")
    if n == 1:
        o_offs = "row * O0 + ow"
    else:
        o_offs = f"(row * {O[n - 2]} + oh[:, None]) * {O[n - 1]} + ow[None, :]"
    body.append(f"o_offs = {o_offs}")
    return body, "o_offs", "o_mask"
