"""Segment reductions: rows reduced per segment, where the segments' bounds are data
(torch.segment_reduce; nn.EmbeddingBag, whose bags are segments of rows read from its table).

The data X is viewed as (O, N, I) around the reduced axis; the bounds are O rows of K offsets
(each segment's first element, and the last one's end when `offsets_end`, else the end is N) or
of S lengths. A program owns one segment of one o and a strip of BLOCK_I columns: it reads its
bounds (a length's start is the sum of the lengths before it), loops over its elements in
BLOCK_R steps, reads each element's row (through `indices` into the table for EmbeddingBag,
scaled by its per-sample weight, a padding row left out) and folds it into the accumulator. The
result is the collapse, combined with the initial value, a mean divided by the count, an empty
segment's value where there were no elements; a fused epilogue runs on it before the one store.
One kernel and no atomics: eager's EmbeddingBag is one kernel too, and the scatter form (a bag
index per element from a cumsum of marks, then atomic adds) took six.
"""

from __future__ import annotations

import math

from ...ops.elementwise import PROPAGATE_NAN
from ...ops.indexing import segments_of
from ...ops.operator import float_source
from ..pointwise import Axes, IndexSpace, PointwiseBlock, tuple_source
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, empty, pow2, stored_values

_ACC = {"torch.float32": "tl.float32", "torch.float64": "tl.float64"}
_NEUTRAL = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0"}
# how a (BLOCK_R, BLOCK_I) tile `xv` folds into `acc`, how `acc` collapses to a value per column,
# and how the initial value combines with it (max and min keep NaN, as PyTorch's do)
_FOLD = {"sum": "acc += xv", "mean": "acc += xv", "prod": "acc *= xv",
         "max": f"acc = tl.maximum(acc, xv{PROPAGATE_NAN})", "min": f"acc = tl.minimum(acc, xv{PROPAGATE_NAN})"}
_COLLAPSE = {"sum": "tl.sum(acc, axis=0)", "mean": "tl.sum(acc, axis=0)", "prod": "tl.reduce(acc, 0, _seg_mul)",
             "max": "tl.reduce(acc, 0, _seg_max)", "min": "tl.reduce(acc, 0, _seg_min)"}
_WITH_INITIAL = {"sum": "res + {i}", "mean": "res + {i}", "prod": "res * {i}",
                 "max": f"tl.maximum(res, {{i}}{PROPAGATE_NAN})", "min": f"tl.minimum(res, {{i}}{PROPAGATE_NAN})"}
_HELPERS = {"prod": ["@triton.jit", "def _seg_mul(a, b):", "    return a * b"],
            "max": ["@triton.jit", "def _seg_max(a, b):", f"    return tl.maximum(a, b{PROPAGATE_NAN})"],
            "min": ["@triton.jit", "def _seg_min(a, b):", f"    return tl.minimum(a, b{PROPAGATE_NAN})"]}

#: a tile of about this many elements; a strip of at most MAX_BLOCK_I columns, narrowed (to
#: MIN_BLOCK_I at least) while the segments at capture give fewer than MIN_PROGRAMS programs:
#: a segment's rows are gathered, each a dependent load, so a GPU wants many programs in flight
TILE, MAX_BLOCK_I, MIN_BLOCK_I, MIN_PROGRAMS = 4096, 256, 32, 1024


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    attrs = node.attrs
    seg = segments_of(node)
    reduce, axis = attrs["reduce"], attrs["axis"]
    inside = {n.name for n in frag.nodes}
    if any(program.used_outside(o, inside) for o in node.outputs[1:]):
        raise Unsupported("EmbeddingBag's bag and count outputs read after it")  # (backward's, not forward's)
    dtype = program.values[seg.data].dtype
    if dtype not in _ACC:
        raise Unsupported(f"a segment {reduce} of {dtype}")
    acc_t = _ACC[dtype]
    if any(v is not None and program.values[v].dtype not in ("torch.int64", "torch.int32")
           for v in (seg.bounds, seg.indices)):
        raise Unsupported("segment bounds or indices that are not integers")
    if seg.weights is not None and program.values[seg.weights].dtype != dtype:
        raise Unsupported("per-sample weights of another dtype")
    out = node.outputs[0]
    out_shape = list(program.values[out].shape)
    stores = stored_values(program, frag, out_shape)
    xs = list(program.values[seg.data].shape)
    I = math.prod(s or 1 for s in xs[axis + 1:])  # (a size that follows the data: any tile)
    segments = math.prod(s or 1 for s in out_shape[:axis + 1])
    block_i = min(pow2(I), MAX_BLOCK_I)
    while block_i > MIN_BLOCK_I and segments * math.ceil(I / block_i) < MIN_PROGRAMS:
        block_i //= 2
    block_r = max(1, min(64, TILE // block_i))

    epi = PointwiseBlock(program, frag.epilogue, out_shape, known={out},
                         reserved={"x_ptr", "bounds_ptr", "idx_ptr", "w_ptr", "N", "S", "K", "I"})
    o_sizes = [f"osize{d}" for d in range(1, len(out_shape))]
    outs = [program.expr(v) for v in stores]
    counted = reduce == "mean" or attrs["padding_idx"] is not None  # elements that count, else end - start
    body = ["seg = tl.program_id(0).to(tl.int64)  # o * S + s",
            "o = seg // S",
            "s = seg - o * S",
            "cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)",
            "col_mask = cols < I"]
    if seg.offsets is not None:  # offsets: this segment's start, and the next one's (or N)
        body += ["start = tl.load(bounds_ptr + o * K + s).to(tl.int64)",
                 "end = tl.load(bounds_ptr + o * K + s + 1, mask=s + 1 < K, other=N).to(tl.int64)"]
    else:  # lengths: the start is the sum of the lengths before
        body += ["start = tl.zeros((), tl.int64)",
                 "for t0 in range(0, s, BLOCK_R):",
                 "    t = t0 + tl.arange(0, BLOCK_R)",
                 "    start += tl.sum(tl.load(bounds_ptr + o * K + t, mask=t < s, other=0).to(tl.int64))",
                 "end = start + tl.load(bounds_ptr + o * K + s).to(tl.int64)"]
    # (bounds past the data read none of it: PyTorch does not check them)
    body += ["end = tl.minimum(end, N)", "start = tl.minimum(start, end)",
             f"acc = tl.full((BLOCK_R, BLOCK_I), {_NEUTRAL[reduce]}, {acc_t})"]
    # EmbeddingBag's max replaces a value only with a greater one: a NaN counts where it is its
    # bag's first kept row, never later (`first`: that row)
    nan_first = reduce == "max" and attrs.get("nan_first", False) and seg.indices is not None
    if counted:
        body.append("count = tl.zeros((BLOCK_R,), tl.int64)")
    if nan_first:
        body.append("first = end")
    body += ["for r0 in range(start, end, BLOCK_R):",
             "    r = r0 + tl.arange(0, BLOCK_R)",
             "    keep = r < end"]
    if seg.indices is not None:  # the element's row of the table
        body.append("    row = tl.load(idx_ptr + r, mask=keep, other=0).to(tl.int64)")
        if attrs["padding_idx"] is not None:
            body.append(f"    keep = keep & (row != {attrs['padding_idx']})")
        body.append("    x_offs = row[:, None] * I + cols[None, :]")
    else:
        body.append("    x_offs = (o * N + r)[:, None] * I + cols[None, :]")
    body += ["    x_mask = keep[:, None] & col_mask[None, :]",
             f"    xv = tl.load(x_ptr + x_offs, mask=x_mask, other={_NEUTRAL[reduce]})"]
    if seg.weights is not None:
        body.append("    xv = xv * tl.load(w_ptr + r, mask=keep, other=0.0)[:, None]")
    body += [f"    xv = tl.where(x_mask, xv, {_NEUTRAL[reduce]})",
             "    acc = tl.where(xv > acc, xv, acc)" if nan_first else f"    {_FOLD[reduce]}"]
    if nan_first:
        body.append("    first = tl.minimum(first, tl.min(tl.where(keep, r, end)))")
    if counted:
        body.append("    count += keep.to(tl.int64)")
    body += [f"res = {_COLLAPSE[reduce]}",
             f"n = {'tl.sum(count, axis=0)' if counted else 'end - start'}"]
    if attrs["initial"] is not None:
        body.append("res = " + _WITH_INITIAL[reduce].format(i=float_source(float(attrs["initial"]))))
    if reduce == "mean":
        body.append(f"res = res / tl.maximum(n, 1).to({acc_t})")
    if nan_first:  # the first kept row's NaN, where it has one
        body += ["first_row = tl.load(idx_ptr + first, mask=first < end, other=0).to(tl.int64)",
                 "first_v = tl.load(x_ptr + first_row * I + cols, mask=col_mask & (first < end), other=0.0)",
                 "res = tl.where(first_v != first_v, first_v, res)"]
    body.append(f"res = tl.where(n == 0, {float_source(float(attrs['empty']))}, res)")
    # the epilogue and the stores: the output row is seg (dims 0..axis), the columns the dims after
    env = {out: "res"}
    o_axes = [a for a in (Axes("seg", 0, axis, scalar=True), Axes("cols", axis + 1, len(out_shape) - 1))
              if a.first <= a.last]
    body.append("out_offs = seg * I + cols")
    body += epi.emit(IndexSpace(len(out_shape), "out_offs", "col_mask", o_sizes, o_axes), env)
    body += [f"tl.store({o}_out + out_offs, {env[v]}, mask=col_mask)" for o, v in zip(outs, stores)]

    name = names.kernel(frag.label)
    tensors = ["x_ptr", "bounds_ptr"] + (["idx_ptr"] if seg.indices else []) + (["w_ptr"] if seg.weights else [])
    params = tensors + epi.params() + [f"{o}_out" for o in outs] + ["N", "S", "K", "I"] + o_sizes
    what = "bag of rows read from the table" if seg.indices else "segment"
    kernel = ["@triton.jit",
              f"def {name}({', '.join(params)}, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):",
              f"    # {frag.label}: a program per ({what}, strip of BLOCK_I columns), its {reduce} in one pass",
              *(f"    {line}" for line in body)]
    kernels = (["\n".join(_HELPERS[reduce])] if reduce in _HELPERS else []) + ["\n".join(kernel)]

    x, b = program.expr(seg.data), program.expr(seg.bounds)
    lines = [f"# {frag.label}: Triton, a segment {reduce} per program, the segments' bounds read in the kernel",
             f"_x = {x}.contiguous()", f"_b = {b}.contiguous()", "_K = _b.shape[-1]",
             f"_S = _K{' - 1' if attrs['offsets_end'] and seg.offsets is not None else ''}"]
    args = ["_x", "_b"]
    if seg.indices is not None:
        lines += [f"_i = {program.expr(seg.indices)}.contiguous()", "_N = _i.shape[0]"]
        args.append("_i")
        out_src = "(_S, _x.shape[1])"
    else:
        lines.append(f"_N = _x.shape[{axis}]")
        out_src = tuple_source([f"_x.shape[{d}]" if d != axis else "_S" for d in range(len(xs))])
    if seg.weights is not None:
        lines.append(f"_w = {program.expr(seg.weights)}.contiguous()")
        args.append("_w")
    rank = len(xs)  # (the sizes around the axis: a product only where there are several)
    lines += ["_O = " + ("1" if axis == 0 else "_x.shape[0]" if axis == 1 else f"math.prod(_x.shape[:{axis}])"),
              "_I = " + ("1" if axis == rank - 1 else f"_x.shape[{rank - 1}]" if axis == rank - 2
                         else f"math.prod(_x.shape[{axis + 1}:])")]
    for o_name, v in zip(outs, stores):
        lines.append(f"{o_name} = {empty(out_src, len(out_shape), f'{x}.device', program.values[v].dtype)}")
    pre, epi_args = epi.launch_args(f"{outs[0]}.shape")
    lines += pre
    size_args = [f"*{outs[0]}.shape[1:]"] if len(out_shape) > 1 else []
    launch = ", ".join(args + epi_args + outs + ["_N", "_S", "_K", "_I"] + size_args)
    lines += ["if _O * _S * _I > 0:  # (no segments: an empty result, and no launch)",
              f"    {name}[(_O * _S, _cdiv(_I, {block_i}))]({launch}, BLOCK_R={block_r}, BLOCK_I={block_i})"]
    return Emitted(kernels, lines)
