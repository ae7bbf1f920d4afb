"""Scans: cumsum and cumprod along one axis, with fused prologue and epilogue.

The input X (contiguous) is viewed as (O, R, I) with R the scanned axis, as in `rows`. A program
owns one o and a strip of BLOCK_I columns of I and walks R in BLOCK_R steps: each step scans its
(BLOCK_R, BLOCK_I) tile in registers (`tl.cumsum` / `tl.associative_scan`) and combines it with
the running total carried from the previous steps, so an axis of any length takes one pass.

Reverse scans: KernelBench writes a reverse cumsum as `flip(cumsum(flip(x)))`. `absorb_flips`
moves a flip along the scanned axis that feeds a scan (or follows one) into the scan's fragment;
the kernel then reads (or writes) the axis backwards, instead of PyTorch copying the tensor twice.

Long scans with few (o, strip) programs (fewer than FEW_PROGRAMS: a compaction's cumsum over a
flattened mask is one row of millions) are cut into chunks of R, a program per chunk: a first
kernel stores each chunk's total, and the scan's program starts its chunk from the totals of the
chunks before it.
"""

from __future__ import annotations

import math

from ...capture import Node
from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, stored_values
from . import autotune, empty, example_sizes, input_launch, pow2

SCANS = {"cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"}
#: scans of (value, index) pairs: the running extreme and where it was
INDEXED = {"cummax": ">=", "cummin": "<="}
# their combine, as PyTorch: a later element takes over when it is NaN or, the kept one not NaN,
# at least as large (small); an index of -1 (the tail past R, the carry's start) is the identity
_EXTREME = """@triton.jit
def _{name}(v1, i1, v2, i2):
    take = (i1 < 0) | ((i2 >= 0) & ((v2 != v2) | ((v1 == v1) & (v2 {cmp} v1))))
    return tl.where(take, v2, v1), tl.where(take, i2, i1)"""
# logcumsumexp's combine: log(exp(a) + exp(b)) from the larger one, so nothing overflows
_LAE = """@triton.jit
def _lae(a, b):
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    return tl.where((lo == float("-inf")) | (hi == float("inf")), hi, hi + tl.log(1.0 + tl.exp(lo - hi)))"""
_SCANNABLE = {"torch.float32", "torch.bool", "torch.int8", "torch.uint8", "torch.int16", "torch.int32", "torch.int64"}
FLIP = "aten.flip.default"
#: chunks along R, where there are fewer programs than this without them (an H100 has 132 SMs;
#: with more, the totals' extra pass over X costs what the chunks' parallelism wins: a (256,
#: 32000) cumsum took the same GPU time in two kernels as in one): at least this long, and
#: about this many programs in all
FEW_PROGRAMS = 128
MIN_CHUNK = 4096
TARGET_PROGRAMS = 1024
#: a chunk is a whole number of this many positions (every tile's BLOCK_R divides it)
CHUNK_QUANTUM = 2048
#: the chunks' totals a scan program reads at once, to start its chunk from those before it
TOTALS_TILE = 64


def _tile_sizes(xs: list, axis: int) -> tuple[int, int, int]:
    """X viewed as (O, R, I) along `axis`, for choosing tiles (a data-dependent size as a long one)."""
    ex = example_sizes(xs)
    return math.prod(ex[:axis]), ex[axis], math.prod(ex[axis + 1:])


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def _flip_axes(program: Program, node: Node) -> list[int]:
    rank = len(program.values[node.outputs[0]].shape)
    return sorted(int(d) % max(rank, 1) for d in node.args[1])


def absorb_flips(program: Program, frags: list[Fragment]) -> list[Fragment]:
    """Fold `flip` nodes along the scanned axis into the scan fragments next to them: the one
    feeding the scan (when only the scan reads it) and the one applied to the fragment's result
    (when only the flip reads that)."""
    owner = {n.name: f for f in frags for n in f.nodes}
    dropped: set[int] = set()

    def lone_flip(node: Node | None, axis: int) -> Fragment | None:
        if node is None or node.target != FLIP or _flip_axes(program, node) != [axis]:
            return None
        frag = owner.get(node.name)
        return frag if frag is not None and frag.kind in ("torch", "indexing") and len(frag.nodes) == 1 else None

    for frag in frags:
        if frag.kind != "scan" or frag.anchor.op not in SCANS - set(INDEXED):  # indices: in order
            continue
        axis = frag.anchor.attrs["dim"]
        x = program.inputs_of(frag.anchor)[0]
        before = lone_flip(program.producer.get(x), axis)
        # only where `emit` takes the fragment: a mixed-mode split would lose the flips
        if program.values[x].dtype != "torch.float32":
            continue
        if before is not None and not frag.prologue and not program.used_outside(x, {frag.anchor.name}):
            frag.nodes.insert(0, before.nodes[0])
            dropped.add(id(before))
        last = frag.nodes[-1].outputs[0]
        users = [u for u in program.users.get(last, []) if not u.mutates]
        if len(users) == 1 and last not in program.roots:
            after = lone_flip(users[0], axis)
            if after is not None:
                frag.nodes.append(after.nodes[0])
                dropped.add(id(after))
    return [f for f in frags if id(f) not in dropped]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op = node.op
    if op not in SCANS:
        raise Unsupported(op)
    flips = [n for n in frag.nodes if n.target == FLIP]
    x = program.inputs_of(node)[0]
    flip_in = next((n for n in flips if n.outputs[0] == x), None)
    flip_out = next((n for n in flips if n is not flip_in), None)
    src = program.inputs_of(flip_in)[0] if flip_in else x  # the tensor actually read
    xs = list(program.values[x].shape)
    if not xs:
        raise Unsupported("a scalar input")
    out = node.outputs[0]
    # PyTorch scans floats in their dtype and integers and booleans in int64
    acc = {"torch.float32": "tl.float32", "torch.int64": "tl.int64"}.get(program.values[out].dtype)
    if acc is None or program.values[src].dtype not in _SCANNABLE:
        raise Unsupported(f"a {program.values[src].dtype} scan into {program.values[out].dtype}")
    rank, axis = len(xs), node.attrs["dim"]
    if any(_flip_axes(program, f) != [axis] for f in flips):
        raise Unsupported("a flip along another axis")
    stores = stored_values(program, frag, xs)
    pro = PointwiseBlock(program, frag.prologue, xs, reserved={"x_ptr"})
    epi = PointwiseBlock(program, frag.epilogue, xs, known={out}, reserved={"x_ptr"} | set(pro.params()))
    name = names.kernel(frag.label)
    outs = [program.expr(o) for o in stores]
    sizes = [f"xsize{d}" for d in range(1, rank)]
    params = (pro.params() if frag.prologue else ["x_ptr"]) + epi.params() + [f"{o}_out" for o in outs]
    params += ["R", "I"] + (sizes if frag.prologue or frag.epilogue else [])

    if op in INDEXED:
        return _emit_indexed(program, frag, names, device)
    if op == "logcumsumexp" and acc != "tl.float32":
        raise Unsupported(f"logcumsumexp into {program.values[out].dtype}")
    combine = {"cumsum": "tl.cumsum(xv, axis=0)", "cumprod": "tl.associative_scan(xv, 0, _mul)",
               "logcumsumexp": "tl.associative_scan(xv, 0, _lae)"}[op]
    total_of = {"cumsum": "tl.sum({}, axis=0)", "cumprod": "tl.reduce({}, 0, _mul)",
                "logcumsumexp": "tl.reduce({}, 0, _lae)"}[op].format
    total = total_of("xv")
    neutral = {"cumsum": "0", "cumprod": "1", "logcumsumexp": 'float("-inf")'}[op]
    neutral += ".0" if acc == "tl.float32" and op != "logcumsumexp" else ""
    fold = "+" if op == "cumsum" else "*"
    # a float32 cumsum adds in float64 and rounds each result once: a long row's running total
    # keeps its accuracy, and thresholds on it (top-p masks) decide as the exact sum does
    wide = op == "cumsum" and acc == "tl.float32"
    scan_acc = "tl.float64" if wide else acc
    join = (lambda a, b: f"_lae({a}, {b})") if op == "logcumsumexp" else (lambda a, b: f"{a} {fold} {b}")
    chunk = [  # this program's chunk of R: positions [lo, hi)
        "o = tl.program_id(0).to(tl.int64)",
        "cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)",
        "col_mask = cols < I",
        "base = o * R * I",
        "c = tl.program_id(2)",
        "lo = c.to(tl.int64) * CHUNK",
        "hi = tl.minimum(lo + CHUNK, R)",
    ]
    start = f"carry = tl.full((BLOCK_I,), {neutral}, {scan_acc})"
    walk = [  # the chunk a tile at a time
        "for q0 in range(lo, hi, BLOCK_R):",
        "    q = q0 + tl.arange(0, BLOCK_R)  # positions in scan order",
        "    mask = (q[:, None] < hi) & col_mask[None, :]",
        "    offs = base + q[:, None].to(tl.int64) * I + cols[None, :]",
    ]
    body = chunk + [
        "# the running total of the chunks before, per column, from their stored totals (a tile of",
        "# them at a time: one load per chunk in turn left the last chunks waiting on hundreds)",
        start,
        f"for p0 in range(0, c, {TOTALS_TILE}):",
        f"    p = p0 + tl.arange(0, {TOTALS_TILE})",
        "    done = tl.load(part_ptr + (o * C + p)[:, None] * I + cols[None, :],",
        f"                   mask=(p[:, None] < c) & col_mask[None, :], other={neutral})",
        f"    carry = {join('carry', total_of('done'))}",
        *walk,
    ]
    read = []  # the tile's values, in scan order, the tail past the chunk the neutral element
    if flips:  # a flip along the axis: read (or write) position R - 1 - q instead of q
        read.append("rev_offs = base + (R - 1 - q)[:, None].to(tl.int64) * I + cols[None, :]")
    if flip_in:
        read.append("xv = tl.load(x_ptr + rev_offs, mask=mask, other=0)")
    elif frag.prologue:
        env: dict[str, str] = {}
        read += pro.emit(IndexSpace(rank, "offs", "mask", sizes), env)
        read.append(f"xv = {env[x]}")
    else:
        read.append("xv = tl.load(x_ptr + offs, mask=mask, other=0)")
    read.append(f"xv = tl.where(mask, xv.to({scan_acc}), {neutral})  # the tail must not reach the carry")
    loop = read + [f"res = {join(combine, 'carry[None, :]')}" if not wide else
                   f"res = ({combine} {fold} carry[None, :]).to({acc})",
                   f"carry = {join('carry', total)}"]
    env = {out: "res"}
    loop += epi.emit(IndexSpace(rank, "offs", "mask", sizes), env)
    if flip_out:
        env[flip_out.outputs[0]] = env[program.inputs_of(flip_out)[0]]
    for o, v in zip(outs, stores):
        where = "rev_offs" if flip_out and v == flip_out.outputs[0] else "offs"
        loop.append(f"tl.store({o}_out + {where}, {env[v]}, mask=mask)")
    body += [f"    {line}" for line in loop]

    # block shapes: a strip of 64 columns when the axis is not the last one, else the axis alone
    O, R, I = _tile_sizes(xs, axis)
    if I > 1:
        tiles = [{"BLOCK_R": min(pow2(R), r), "BLOCK_I": min(pow2(I), i), "num_warps": w}
                 for r, i, w in ((32, 64, 4), (16, 128, 4), (64, 32, 4))]
    else:
        tiles = [{"BLOCK_R": min(pow2(R), r), "BLOCK_I": 1, "num_warps": w}
                 for r, w in ((1024, 4), (2048, 8), (512, 4))]
    helpers = {"cumsum": [], "cumprod": ["@triton.jit\ndef _mul(a, b):\n    return a * b"],
               "logcumsumexp": [_LAE]}[op]
    direction = " backwards" if flip_in and flip_out else (", read reversed" if flip_in else
                                                           (", written reversed" if flip_out else ""))
    chunking = ["part_ptr", "C", "CHUNK"]
    kernel = autotune(tiles, ["R", "I"], device) + [
        "@triton.jit",
        f"def {name}({', '.join(params + chunking)}, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):",
        f"    # {op} along axis {axis}{direction}: X viewed as (O, R, I) = ({O}, {R}, {I}) at capture; a program",
        "    # per (o, strip of I, chunk of R) scans its chunk a tile at a time, carrying the running total",
        *([f"    # fused: {frag.label}"] if len(frag.nodes) > 1 else []),
        *(f"    {line}" for line in body),
    ]
    totals = names.kernel(f"{frag.label} totals")
    t_params = (pro.params() if frag.prologue else ["x_ptr"]) + ["R", "I"] + (sizes if frag.prologue else [])
    t_kernel = autotune(tiles, ["R", "I"], device) + [
        "@triton.jit",
        f"def {totals}({', '.join(t_params + chunking)}, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):",
        f"    # {op}, the chunks' totals: a program per (o, strip of I, chunk of R) stores its chunk's",
        *(f"    {line}" for line in chunk + [start] + walk),
        *(f"        {line}" for line in read),
        f"        carry = {join('carry', total)}",
        "    tl.store(part_ptr + (o * C + c) * I + cols, carry, mask=col_mask)",
    ]
    part_dtype = {"tl.float64": "torch.float64", "tl.float32": "torch.float32", "tl.int64": "torch.int64"}[scan_acc]
    lines = _launch(program, frag, op, axis, pro, src, epi, outs, stores, name, (totals, part_dtype))
    return Emitted(helpers + ["\n".join(t_kernel), "\n".join(kernel)], lines)


def _launch(program: Program, frag: Fragment, op: str, axis: int, pro, src, epi, outs: list[str],
            stores: list[str], name: str, chunked: tuple[str, str] | None = None) -> list[str]:
    """Forward's lines for a scan: the input, X viewed as (O, R, I) along `axis`, the outputs,
    and one program per (o, strip of I); `chunked` (the totals kernel, the totals' dtype): one
    per chunk of R too, as many chunks as keep about TARGET_PROGRAMS programs busy."""
    lines = [f"# {frag.label}: Triton, {op}{' fused' if len(frag.nodes) > 1 else ''}"]
    pre, dev, args = input_launch(program, pro if frag.prologue else None, src)
    lines += pre
    lines.append(f"_O, _R, _I = math.prod(_xs[:{axis}]), _xs[{axis}], math.prod(_xs[{axis + 1}:])")
    for o, v in zip(outs, stores):
        lines.append(f"{o} = {empty('_xs', len(program.values[v].shape), dev, program.values[v].dtype)}")
    pre, a = epi.launch_args(f"{outs[0]}.shape")
    lines += pre
    x_args = list(args)
    args += a + outs + ["_R", "_I"] + (["*_xs[1:]"] if frag.prologue or frag.epilogue else [])
    if chunked is None:
        lines.append(f"{name}[lambda meta: (_O, _cdiv(_I, meta['BLOCK_I']))]({', '.join(args)})")
        return lines
    totals, dtype = chunked
    lines += ["_P = max(_O * _cdiv(_I, 64), 1)  # programs without chunks",
              f"_C = max(1, min(_R // {MIN_CHUNK}, {TARGET_PROGRAMS} // _P)) if _P < {FEW_PROGRAMS} else 1  # chunks of R",
              f"_CH = max(1, _cdiv(_cdiv(_R, _C), {CHUNK_QUANTUM})) * {CHUNK_QUANTUM}  # (R may be 0: an empty selection)",
              "_C = _cdiv(_R, _CH)",
              f"_part = torch.empty(_O * _C * _I, device={dev}, dtype={dtype})  # each chunk's total",
              "if _C > 1:",
              f"    {totals}[lambda meta: (_O, _cdiv(_I, meta['BLOCK_I']), _C)]("
              f"{', '.join(x_args + ['_R', '_I'] + (['*_xs[1:]'] if frag.prologue else []) + ['_part', '_C', '_CH'])})",
              f"{name}[lambda meta: (_O, _cdiv(_I, meta['BLOCK_I']), _C)]({', '.join(args + ['_part', '_C', '_CH'])})"]
    return lines


def _emit_indexed(program: Program, frag: Fragment, names: Names, device: str) -> Emitted:
    """cummax / cummin: a scan of (value, index) pairs, the carry a pair too."""
    node = frag.anchor
    op = node.op
    x = program.inputs_of(node)[0]
    xs = list(program.values[x].shape)
    if program.values[x].dtype != "torch.float32":
        raise Unsupported(f"{op} of {program.values[x].dtype}")
    if len(frag.nodes) > 1 + len(frag.prologue) + len(frag.epilogue):
        raise Unsupported(f"{op} with flips")
    out, idx = node.outputs[0], (node.outputs[1] if len(node.outputs) > 1 else None)
    rank, axis = len(xs), node.attrs["dim"]
    stores = stored_values(program, frag, xs)
    pro = PointwiseBlock(program, frag.prologue, xs, reserved={"x_ptr"})
    epi = PointwiseBlock(program, frag.epilogue, xs, known={out, idx} - {None},
                         reserved={"x_ptr"} | set(pro.params()))
    name = names.kernel(frag.label)
    outs = [program.expr(o) for o in stores]
    sizes = [f"xsize{d}" for d in range(1, rank)]
    params = (pro.params() if frag.prologue else ["x_ptr"]) + epi.params() + [f"{o}_out" for o in outs]
    params += ["R", "I"] + (sizes if frag.prologue or frag.epilogue else [])
    neutral = 'float("-inf")' if op == "cummax" else 'float("inf")'
    fn = f"_{op}"
    body = [
        "o = tl.program_id(0).to(tl.int64)",
        "cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)",
        "col_mask = cols < I",
        "base = o * R * I",
        "# the extreme of the steps before and its index, per column (-1: none yet)",
        f"carry = tl.full((BLOCK_I,), {neutral}, tl.float32)",
        "carry_i = tl.full((BLOCK_I,), -1, tl.int64)",
        "for q0 in range(0, R, BLOCK_R):",
        "    q = q0 + tl.arange(0, BLOCK_R)  # positions along the axis",
        "    mask = (q[:, None] < R) & col_mask[None, :]",
        "    offs = base + q[:, None].to(tl.int64) * I + cols[None, :]",
    ]
    loop = []
    if frag.prologue:
        env: dict[str, str] = {}
        loop += pro.emit(IndexSpace(rank, "offs", "mask", sizes), env)
        loop.append(f"xv = {env[x]}")
    else:
        loop.append("xv = tl.load(x_ptr + offs, mask=mask, other=0)")
    loop += [f"xv = tl.where(mask, xv.to(tl.float32), {neutral})",
             "qi = tl.where(mask, q[:, None].to(tl.int64), -1)  # the tail past R: the identity",
             f"sv, si = tl.associative_scan((xv, qi), 0, {fn})",
             f"res, res_i = {fn}(carry[None, :], carry_i[None, :], sv, si)",
             f"tv, ti = tl.reduce((xv, qi), 0, {fn})",
             f"carry, carry_i = {fn}(carry, carry_i, tv, ti)"]
    env = {out: "res", **({idx: "res_i"} if idx else {})}
    loop += epi.emit(IndexSpace(rank, "offs", "mask", sizes), env)
    loop += [f"tl.store({o}_out + offs, {env[v]}, mask=mask)" for o, v in zip(outs, stores)]
    body += [f"    {line}" for line in loop]
    O, R, I = _tile_sizes(xs, axis)
    if I > 1:
        tiles = [{"BLOCK_R": min(pow2(R), r), "BLOCK_I": min(pow2(I), i), "num_warps": w}
                 for r, i, w in ((32, 64, 4), (16, 128, 4))]
    else:
        tiles = [{"BLOCK_R": min(pow2(R), r), "BLOCK_I": 1, "num_warps": w} for r, w in ((1024, 4), (512, 4))]
    kernel = autotune(tiles, ["R", "I"], device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):",
        f"    # {op} along axis {axis}: X viewed as (O, R, I) = ({O}, {R}, {I}) at capture; a program",
        "    # per (o, strip of I) scans (value, index) pairs a tile at a time, carrying the extreme so far",
        *([f"    # fused: {frag.label}"] if len(frag.nodes) > 1 else []),
        *(f"    {line}" for line in body),
    ]
    lines = _launch(program, frag, op, axis, pro, x, epi, outs, stores, name)
    helper = _EXTREME.format(name=op, cmp=INDEXED[op])
    return Emitted([helper, "\n".join(kernel)], lines)
