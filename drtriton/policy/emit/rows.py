"""Reductions and softmax: everything that reads along one block of axes and keeps no statistics
(the normalisations are `norms`).

The anchor's input X (contiguous) is viewed as (O, R, I): O the axes before the reduced block,
R the reduced block, I the axes after it. A program owns one o and a strip of BLOCK_I columns of
I, and loops over R in BLOCK_R steps (coalesced along I when I > 1, along R when I == 1). A
fused prologue computes X from its operands as it is loaded; a fused epilogue runs on the
result before the one store.

- reductions (sum, mean, max, min, prod, argmax, argmin, logsumexp, norm): one pass over R;
  var and std two (the mean, then the squared deviations from it: no cancellation). max and min
  whose indices are used too run as argmax/argmin and store both.
  When the output gives too few programs to fill a GPU (a full reduction: one) and R is long,
  sum, mean, norm, prod, max and min split R into chunks, in two kernels: stage 1 runs a program
  per (o, strip of I, chunk of R) and stores the chunk's partial (fp32, the prologue applied per
  element as usual); stage 2 runs a program per (o, strip of I) that combines the partials in a
  fixed order (deterministic, no atomics), then finishes (mean's division, norm's root) and runs
  the epilogue. argmax/argmin (indices and ties across chunks) and logsumexp (a (max, sum)
  pair) keep the one pass.
- softmax / log_softmax: an online max-and-sum pass, then a writing pass.
"""

from __future__ import annotations

import math

from ...ops.elementwise import PROPAGATE_NAN
from ..pointwise import Axes, IndexSpace, PointwiseBlock, tuple_source
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, empty, example_sizes, input_launch, pow2, stored_values

REDUCTIONS = {"sum", "mean", "max", "min", "prod", "argmax", "argmin", "logsumexp", "norm", "var", "std"}
SOFTMAXES = {"softmax", "log_softmax"}

#: the accumulator's dtype by the input's: float64 stays float64; integers and booleans (sums,
#: products, extrema, arg-extrema) accumulate in int64, exactly, as PyTorch does
_ACC = {"torch.float32": "tl.float32", "torch.float64": "tl.float64"}
_INTEGERS = {"torch.bool", "torch.int8", "torch.uint8", "torch.int16", "torch.int32", "torch.int64"}
INTEGER_OPS = {"sum", "prod", "max", "min", "argmax", "argmin"}
_INT_NEUTRAL = {"sum": "0", "prod": "1", "max": str(-2**63), "min": str(2**63 - 1), "argmax": str(-2**63),
                "argmin": str(2**63 - 1)}
_TORCH = {"tl.float32": "torch.float32", "tl.float64": "torch.float64", "tl.int64": "torch.int64"}


def accumulator(op: str, dtype: str) -> str:
    """The Triton dtype `op` accumulates an input of `dtype` in; Unsupported for others
    (half precision, or an integer input to an operator that needs floats)."""
    if dtype in _ACC:
        return _ACC[dtype]
    if dtype in _INTEGERS and op in INTEGER_OPS:
        return "tl.int64"
    raise Unsupported(f"{op} of a {dtype.removeprefix('torch.')} input")


_NEUTRAL = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0",
            "argmax": 'float("-inf")', "argmin": 'float("inf")', "logsumexp": 'float("-inf")', "norm": "0.0",
            "var": "0.0", "std": "0.0"}

#: reductions whose partials combine with one operation (mean and norm partials are sums)
SPLITTABLE = {"sum", "mean", "norm", "prod", "max", "min"}
#: split when the output gives fewer programs than this (an H100 has 132 SMs)...
SPLIT_BELOW = 256
#: ... and R holds at least MIN_CHUNKS chunks of CHUNK_TILES BLOCK_R tiles
CHUNK_TILES = 4
MIN_CHUNKS = 4
#: stage 1 of a split aims for about this many programs
TARGET_PROGRAMS = 1024

# a reduction's accumulator: how a (BLOCK, BLOCK_I) tile of values `v` folds into `acc`, and
# how `acc` collapses to one value per column; max and min keep NaN as PyTorch's amax does (tl.max
# would not on the GPU: max.f32 returns the operand that is not NaN)
_FOLD = {"sum": "acc += {v}", "prod": "acc *= {v}", "max": "acc = tl.maximum(acc, {v}" + PROPAGATE_NAN + ")",
         "min": "acc = tl.minimum(acc, {v}" + PROPAGATE_NAN + ")"}
_COLLAPSE = {"sum": "tl.sum(acc, axis=0)", "prod": "tl.reduce(acc, 0, _mul)", "max": "tl.reduce(acc, 0, _max_nan)",
             "min": "tl.reduce(acc, 0, _min_nan)"}
_HELPERS = {"prod": ["@triton.jit", "def _mul(a, b):", "    return a * b"],
            "max": ["@triton.jit", "def _max_nan(a, b):", f"    return tl.maximum(a, b{PROPAGATE_NAN})"],
            "min": ["@triton.jit", "def _min_nan(a, b):", f"    return tl.minimum(a, b{PROPAGATE_NAN})"]}
_HELPERS.update(argmax=_HELPERS["max"], argmin=_HELPERS["min"])


def _combiner(op: str) -> str:
    """The operation that folds values, and partials, of a splittable reduction."""
    return "sum" if op in ("sum", "mean", "norm") else op


def _finish(op: str, node) -> list[str]:
    """Lines from the combined `res` to the reduction's value."""
    if op == "mean":
        return ["res = res / R"]
    if op == "norm" and node.attrs["p"] == 2:
        return ["res = tl.sqrt(res)"]
    return []


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def _block_axes(op: str, attrs: dict, rank: int) -> tuple[int, int]:
    """First and last reduced axis (they must be contiguous)."""
    if op in REDUCTIONS:
        dims = _reduced(attrs, rank)
    elif op in SOFTMAXES:
        dims = [attrs["dim"]]
    else:
        raise Unsupported(op)
    if not dims or dims != list(range(dims[0], dims[-1] + 1)):
        raise Unsupported(f"{op} over non-adjacent axes {dims}")
    return dims[0], dims[-1]


def _moved(op: str, attrs: dict, rank: int) -> list[int] | None:
    """For a reduction over axes that are not adjacent (batch statistics over N and the spatial
    axes of (N, C, L)): the permutation putting the kept axes first, in order, and the reduced
    ones last, so that X, copied in that order, is (O, R, 1). None when the axes are adjacent."""
    if op not in REDUCTIONS:
        return None
    dims = _reduced(attrs, rank)
    if not dims or dims == list(range(dims[0], dims[-1] + 1)):
        return None
    return [d for d in range(rank) if d not in dims] + dims


def computes_input(op: str, attrs: dict, rank: int) -> bool:
    """Whether this template can compute `op`'s input of `rank` dims as it loads it (a prologue,
    or a value recomputed there): a reduction or softmax whose reduced axes are adjacent (others
    are first moved last by a copy, which reads a stored tensor)."""
    return op in REDUCTIONS | SOFTMAXES and rank >= 1 and _moved(op, attrs, rank) is None


def _reduced(attrs: dict, rank: int) -> list[int]:
    """The reduced axes, sorted and non-negative (none listed: all of them, as PyTorch reads it)."""
    dims = attrs.get("dim")
    dims = [] if dims is None else dims if isinstance(dims, (list, tuple)) else [dims]
    return sorted({d % rank for d in dims}) or list(range(rank))


def _prod(xs) -> int:
    return math.prod(xs) if xs else 1


def row_tile(R: int, I: int, softmax: bool = False) -> tuple[int, int, int]:
    """(BLOCK_R, BLOCK_I, num_warps) for rows of R elements over I columns. Across columns
    (I > 1): a tile of about 4096 elements, short reduced blocks taking wider strips. Along
    contiguous rows (I == 1) a program owns a row: a long one takes a wider tile and more warps,
    so that the few programs of a few hundred long rows (a vocabulary's logits) keep enough loads
    in flight to reach the memory's bandwidth."""
    if I > 1:
        block_r = min(64, pow2(R))
        return block_r, min(pow2(I), max(64, 4096 // block_r)), 4
    for at_least, block_r, warps in (SOFTMAX_ROW_TILES if softmax else LONG_ROW_TILES):
        if R >= at_least:
            return block_r, 1, warps
    block_r, warps = ROW_TILE
    return block_r, 1, warps


#: (BLOCK_R, num_warps) along contiguous rows shorter than the tables' below, and in split reductions
ROW_TILE = (1024, 4)
#: (R at least, BLOCK_R, num_warps) along contiguous rows, longest first. Measured on an H200
#: (docs/benchmarks.md, session 33): a sum over 256 x 32000 takes 39 us with (1024, 4), 19 us
#: with (4096, 16); softmax 100 us with (1024, 4), 35 us with (8192, 16); below 4096 elements a
#: row, (1024, 4) was as fast as any
LONG_ROW_TILES = [(16384, 4096, 16), (4096, 2048, 8)]
SOFTMAX_ROW_TILES = [(16384, 8192, 16), (4096, 2048, 4)]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op = node.op
    if op not in REDUCTIONS | SOFTMAXES:
        raise Unsupported(op)
    ins = program.inputs_of(node)
    x = ins[0]
    xs = list(program.values[x].shape)
    scalar = not xs  # a 0-d input: one row of one element (its result is 0-d too)
    if scalar:
        xs = [1]
    acc_t = accumulator(op, program.values[x].dtype)
    neutrals = _INT_NEUTRAL if acc_t == "tl.int64" else _NEUTRAL
    # max/min with their indices used (torch.max(x, dim)): argmax/argmin's pass, storing both
    with_indices = (op in ("max", "min") and len(node.outputs) > 1
                    and program.used_outside(node.outputs[1], {node.name}))
    fold = {"max": "argmax", "min": "argmin"}[op] if with_indices else op
    rank = len(xs)
    # X computed as it is loaded: by a fused prologue, or recomputed (a read through ids, index
    # arithmetic: `recompute.reduction_reads_in_place`)
    computed = bool(frag.prologue) or program.is_recomputed(x)
    perm = None if scalar else _moved(op, node.attrs, rank)
    if perm is not None:  # the reduced axes moved last (a copy): X is (O, R, 1)
        if computed:
            raise Unsupported(f"{op} over non-adjacent axes with a fused prologue")
        if with_indices:
            raise Unsupported(f"{op} with indices over non-adjacent axes")
        first, last = rank - len(_reduced(node.attrs, rank)), rank - 1
        xs = [xs[d] for d in perm]
    else:
        first, last = (0, 0) if scalar else _block_axes(op, node.attrs, rank)
    ex = example_sizes(xs)
    O, R, I = _prod(ex[:first]), _prod(ex[first:last + 1]), _prod(ex[last + 1:])

    out = node.outputs[0]
    out_shape = list(program.values[out].shape)
    stores = stored_values(program, frag, out_shape)
    if with_indices:  # the values are stored (the launch reads their shape); the indices apart
        stores = [out] + [v for v in stores if v not in (out, node.outputs[1])]
    # prologue: computes X from loaded operands, per element of X
    reserved = {"x_ptr", "part_ptr"}
    pro = PointwiseBlock(program, frag.prologue, xs, reserved=reserved, wanted=(x,))
    # the epilogue may read the indices too (max_pool's decomposition: where the maximum was)
    known = {out, node.outputs[1]} if with_indices else {out}
    epi = PointwiseBlock(program, frag.epilogue, out_shape, known=known, reserved=reserved | set(pro.params()))
    name = names.kernel(frag.label)
    outs = [program.expr(o) for o in stores]

    block_r, block_i, warps = row_tile(R, I, softmax=op in SOFTMAXES)
    # few programs (O x strips of I) and a long R: split R over more programs, in two stages, of
    # ROW_TILE tiles along rows (the chunks give the parallelism a wide tile would)
    split = (fold in SPLITTABLE and O * math.ceil(I / block_i) < SPLIT_BELOW
             and R >= MIN_CHUNKS * CHUNK_TILES * min(block_r, ROW_TILE[0]))
    if split and I == 1:
        block_r, warps = ROW_TILE

    x_sizes = [f"xsize{d}" for d in range(1, rank)]
    o_sizes = [f"osize{d}" for d in range(1, len(out_shape))]
    params = (["x_ptr"] if not computed else pro.params())
    out_params = epi.params() + [f"{o}_out" for o in outs] + (["idx_out"] if with_indices else [])
    if split:  # stage 1 stores partials; the outputs are stage 2's
        params += ["part_ptr", "R", "I"] + x_sizes
    else:
        params += out_params + ["R", "I"] + x_sizes + o_sizes

    # where the tile's elements are: o runs over the dims before the reduced block, r over the
    # block, the columns over the dims after it
    x_axes = _axes(["o", "r[:, None]", "cols[None, :]"], first, last, rank)

    def load_x(indent: str, end: str = "R") -> list[str]:
        """X at rows r (< end) of the program's columns, as `xv`."""
        lines = ["x_offs = base + r[:, None].to(tl.int64) * I + cols[None, :]",
                 f"x_mask = (r[:, None] < {end}) & col_mask[None, :]"]
        if computed:
            env = {}
            lines += pro.emit(IndexSpace(rank, "x_offs", "x_mask", x_sizes, x_axes), env)
            lines.append(f"xv = {env[x]}")
        else:
            lines.append("xv = tl.load(x_ptr + x_offs, mask=x_mask, other=0.0)")
        if program.values[x].dtype != _TORCH.get(acc_t):  # booleans, narrower integers
            lines.append(f"xv = xv.to({acc_t})")
        return [indent + line for line in lines]

    def store_result() -> list[str]:
        """The epilogue on the reduced values `res`, then the stores (output offset o * I + col)."""
        env = {out: "res", **({node.outputs[1]: "res_i"} if with_indices else {})}
        lines = ["out_offs = o * I + cols"]
        kept = last - first + 1 if node.attrs.get("keepdim") and not scalar else 0
        o_axes = _axes(["o", None, "cols"], first, first + kept - 1, len(out_shape))
        if perm is not None:  # I is 1: o runs over the whole output, in its own order
            o_axes = [Axes("o", 0, len(out_shape) - 1, scalar=True)] if out_shape else []
        lines += epi.emit(IndexSpace(len(out_shape), "out_offs", "col_mask", o_sizes, o_axes), env)
        lines += [f"tl.store({o_name}_out + out_offs, {env[v]}, mask=col_mask)" for o_name, v in zip(outs, stores)]
        if with_indices:
            lines.append("tl.store(idx_out + out_offs, res_i, mask=col_mask)")
        return lines

    body = [
        "o = tl.program_id(0).to(tl.int64)",
        "cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)",
        "col_mask = cols < I",
        "base = o * R * I",
    ]
    if split:
        body += [
            "# this program's chunk of R (chunk tl.program_id(2) of tl.num_programs(2)): whole BLOCK_R tiles",
            "chunk = tl.cdiv(tl.cdiv(R, tl.num_programs(2)), BLOCK_R) * BLOCK_R",
            "lo = tl.program_id(2).to(tl.int64) * chunk  # int64: rounded-up chunks can run past 2**31",
            "hi = tl.minimum(lo + chunk, R)",
        ]
    lo, hi = ("lo", "hi") if split else ("0", "R")
    if op in REDUCTIONS:
        neutral = neutrals[op]
        body.append(f"acc = tl.full((BLOCK_R, BLOCK_I), {neutral}, {acc_t})")
        if fold in ("argmax", "argmin"):
            body.append("acc_i = tl.zeros((BLOCK_R, BLOCK_I), tl.int64)")
        if op == "logsumexp":
            body.append(f"run_max = tl.full((BLOCK_I,), float(\"-inf\"), {acc_t})")
            body.append(f"run_sum = tl.zeros((BLOCK_I,), {acc_t})")
        if op in ("var", "std"):  # first pass: the mean
            body.append(f"for r0 in range({lo}, {hi}, BLOCK_R):")
            body.append("    r = r0 + tl.arange(0, BLOCK_R)")
            body += load_x("    ", hi)
            body.append("    acc += tl.where(x_mask, xv, 0.0)")
            body.append("mu = tl.sum(acc, axis=0) / R")
            body.append(f"acc = tl.zeros((BLOCK_R, BLOCK_I), {acc_t})")
        body.append(f"for r0 in range({lo}, {hi}, BLOCK_R):")
        body.append("    r = r0 + tl.arange(0, BLOCK_R)")
        body += load_x("    ", hi)
        body.append(f"    xv = tl.where(x_mask, xv, {neutral})")
        if op in SPLITTABLE and not with_indices:
            value = ("tl.abs(xv)" if node.attrs["p"] == 1 else "xv * xv") if op == "norm" else "xv"
            body.append("    " + _FOLD[_combiner(op)].format(v=value))
        elif fold in ("argmax", "argmin"):
            cmp = ">" if fold == "argmax" else "<"
            # strict comparison keeps the first occurrence, as PyTorch does; NaN beats every number
            # (PyTorch's argmax and argmin both return the first NaN)
            body.append(f"    better = (xv {cmp} acc) | ((xv != xv) & (acc == acc))")
            body.append("    acc_i = tl.where(better, r[:, None] + tl.zeros_like(acc_i), acc_i)")
            body.append("    acc = tl.where(better, xv, acc)")
        elif op == "logsumexp":
            body.append("    new_max = tl.maximum(run_max, tl.max(xv, axis=0))")
            body.append("    safe = tl.where(new_max == float(\"-inf\"), 0.0, new_max)")
            body.append("    run_sum = run_sum * tl.exp(run_max - safe) + tl.sum(tl.exp(xv - safe[None, :]), axis=0)")
            body.append("    run_max = new_max")
        elif op in ("var", "std"):
            body.append("    dev = tl.where(x_mask, xv - mu[None, :], 0.0)")
            body.append("    acc += dev * dev")
        if split:
            body += [f"part = {_COLLAPSE[_combiner(op)]}",
                     "part_offs = (o * tl.num_programs(2) + tl.program_id(2)) * I + cols  # part[o, chunk, cols]",
                     "tl.store(part_ptr + part_offs, part, mask=col_mask)"]
        elif op in SPLITTABLE and not with_indices:
            body.append(f"res = {_COLLAPSE[_combiner(op)]}")
            body += _finish(op, node)
        elif fold in ("argmax", "argmin"):
            fn = "max" if fold == "argmax" else "min"
            body.append(f"best = tl.reduce(acc, 0, _{fn}_nan)")
            body.append("cand = tl.where((acc == best[None, :]) | ((acc != acc) & (best != best)[None, :]), acc_i, R)")
            if with_indices:  # the values, and where they first occur
                body.append("res_i = tl.min(cand, axis=0)")
                body.append("res = best")
            else:
                body.append("res = tl.min(cand, axis=0)")
        elif op == "logsumexp":
            body.append("safe = tl.where(run_max == float(\"-inf\"), 0.0, run_max)")
            body.append("res = safe + tl.log(run_sum)")
        elif op in ("var", "std"):  # over max(R - correction, 0), as PyTorch divides
            body.append(f"res = tl.sum(acc, axis=0) / tl.maximum(R - {float(node.attrs.get('correction', 1.0))!r}, 0.0)")
            if op == "std":
                body.append("res = tl.sqrt(res)")
        if not split:
            body += store_result()
    else:
        body += _softmax(op, load_x, epi, out, outs, stores, x_sizes, rank, x_axes, acc_t)

    helpers = _HELPERS.get(_combiner(op), [])
    shape = f"X viewed as (O, R, I) = ({O}, {R}, {I}) at capture"
    if split:
        partials = {"sum": "sums", "prod": "products", "max": "maxima", "min": "minima"}[_combiner(op)]
        header = [f"    # {frag.label}, stage 1 of 2: {shape};",
                  f"    # a program per (o, strip of I, chunk of R) stores its chunk's partial {partials}"]
    else:
        header = [f"    # {frag.label}: {shape}; a program per (o, strip of I)"]
    kernel = [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):",
        *header,
        *(f"    {line}" for line in body),
    ]
    kernels = (["\n".join(helpers)] if helpers else []) + ["\n".join(kernel)]
    if split:
        finish = names.kernel(f"{frag.label} finish")
        combine = _combiner(op)
        kernels.append("\n".join([
            "@triton.jit",
            f"def {finish}({', '.join(['part_ptr'] + out_params + ['R', 'I', 'SPLIT'] + o_sizes)}, "
            "BLOCK_S: tl.constexpr, BLOCK_I: tl.constexpr):",
            f"    # {frag.label}, stage 2 of 2: a program per (o, strip of I) combines the SPLIT partials",
            f"    # of its columns in order (deterministic), then finishes the {op}"
            + (" and runs the epilogue" if frag.epilogue else ""),
            "    o = tl.program_id(0).to(tl.int64)",
            "    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)",
            "    col_mask = cols < I",
            f"    acc = tl.full((BLOCK_S, BLOCK_I), {neutrals[op]}, {acc_t})",
            "    for s0 in range(0, SPLIT, BLOCK_S):",
            "        s = s0 + tl.arange(0, BLOCK_S)",
            "        p_mask = (s[:, None] < SPLIT) & col_mask[None, :]",
            "        p_offs = (o * SPLIT + s[:, None]) * I + cols[None, :]  # part[o, s, cols]",
            f"        pv = tl.load(part_ptr + p_offs, mask=p_mask, other={neutrals[op]})",
            "        " + _FOLD[combine].format(v="pv"),
            f"    res = {_COLLAPSE[combine]}",
            *(f"    {line}" for line in _finish(op, node) + store_result()),
        ]))

    # launcher
    how = ", split over R in two stages" if split else ""
    lines = [f"# {frag.label}: Triton, {'fused ' if len(frag.nodes) > 1 else ''}{op}{how}"]
    pre, device, args = input_launch(program, pro if computed else None, x, scalar=scalar)
    if perm is not None:  # the reduced axes last, copied so
        pre = [f"_x = {program.expr(x)}.permute({', '.join(map(str, perm))}).contiguous()", "_xs = _x.shape"]
    lines += pre
    lines.append(f"_O, _R, _I = math.prod(_xs[:{first}]), math.prod(_xs[{first}:{last + 1}]), math.prod(_xs[{last + 1}:])")
    out_src = "()" if scalar else _out_shape_source(op, node, first, last, rank)
    if perm is not None:  # the kept axes in their order (with the reduced ones as 1 for keepdim)
        keep = node.attrs.get("keepdim")
        reduced = _reduced(node.attrs, rank)
        dims_src = ["1" if d in reduced else f"{program.expr(x)}.shape[{d}]" for d in range(rank)
                    if keep or d not in reduced]
        out_src = tuple_source(dims_src)
    for o_name, v in zip(outs, stores):  # each value in its own dtype (an epilogue's comparison: bool)
        lines.append(f"{o_name} = {empty(out_src, len(program.values[v].shape), device, program.values[v].dtype)}")
    if with_indices:
        idx = program.expr(node.outputs[1])
        lines.append(f"{idx} = {empty(out_src, len(program.values[node.outputs[1]].shape), device, 'torch.int64')}")
        out_params_launch = [idx]
    else:
        out_params_launch = []
    pre, epi_args = epi.launch_args(f"{outs[0]}.shape")
    lines += pre
    out_args = epi_args + outs + out_params_launch
    o_size_args = [f"*{outs[0]}.shape[1:]"] if len(out_shape) > 1 else []
    lines.append(f"_BI = {block_i} if _I > 1 else 1")
    if split:
        stage1 = args + ["_part", "_R", "_I", "*_xs[1:]"]
        stage2 = ["_part"] + out_args + ["_R", "_I", "_SPLIT"] + o_size_args
        lines += [
            "_programs = max(1, _O * _cdiv(_I, _BI))  # one per (o, strip of I)",
            f"_SPLIT = max(1, min(_cdiv(_R, {CHUNK_TILES * block_r}), {TARGET_PROGRAMS} // _programs))"
            "  # chunks of R",
            f"_part = torch.empty(_O, _SPLIT, _I, device={device}, dtype={_TORCH[acc_t]})"
            "  # a partial per (o, chunk, column)",
            f"{name}[(_O, _cdiv(_I, _BI), _SPLIT)]({', '.join(stage1)}, BLOCK_R={block_r}, BLOCK_I=_BI, "
            f"num_warps={warps})",
            f"{finish}[(_O, _cdiv(_I, _BI))]({', '.join(stage2)}, BLOCK_S={block_r}, BLOCK_I=_BI)",
        ]
        return Emitted(kernels, lines)
    args += out_args + ["_R", "_I", "*_xs[1:]"] + o_size_args
    lines.append(f"{name}[(_O, _cdiv(_I, _BI))]({', '.join(args)}, BLOCK_R={block_r}, BLOCK_I=_BI, num_warps={warps})")
    return Emitted(kernels, lines)


def _out_shape_source(op: str, node, first: int, last: int, rank: int) -> str:
    if op in SOFTMAXES:
        return "_xs"
    if node.attrs.get("keepdim"):
        return f"(*_xs[:{first}], {', '.join('1' for _ in range(first, last + 1))}, *_xs[{last + 1}:])"
    return f"(*_xs[:{first}], *_xs[{last + 1}:])"


def _axes(vars: list, first: int, last: int, rank: int) -> list[Axes]:
    """Axes for a tile over (before, block, after) = dims (0..first-1, first..last, last+1..):
    `vars` names the index over each run (None: none); o, the program's, is a scalar."""
    runs = [(0, first - 1), (first, last), (last + 1, rank - 1)]
    return [Axes(v, a, b, scalar=v == "o") for v, (a, b) in zip(vars, runs) if v is not None and a <= b]


def _softmax(op, load_x, epi, out, outs, stores, x_sizes, rank, x_axes, acc_t="tl.float32") -> list[str]:
    """softmax / log_softmax: the running max and sum over R per column, then a pass that writes
    X's shape."""
    body = [f"run_max = tl.full((BLOCK_I,), float(\"-inf\"), {acc_t})",
            f"run_sum = tl.zeros((BLOCK_I,), {acc_t})",
            "for r0 in range(0, R, BLOCK_R):",
            "    r = r0 + tl.arange(0, BLOCK_R)"]
    body += load_x("    ")
    body += ["    xv = tl.where(x_mask, xv, float(\"-inf\"))",
             "    new_max = tl.maximum(run_max, tl.max(xv, axis=0))",
             "    safe = tl.where(new_max == float(\"-inf\"), 0.0, new_max)",
             "    run_sum = run_sum * tl.exp(run_max - safe) + tl.sum(tl.exp(xv - safe[None, :]), axis=0)",
             "    run_max = new_max",
             "row_max = tl.where(run_max == float(\"-inf\"), 0.0, run_max)"]
    if op == "softmax":
        body.append("inv_sum = 1.0 / run_sum")
        write = "tl.exp(xv - row_max[None, :]) * inv_sum[None, :]"
    else:
        body.append("log_sum = tl.log(run_sum)")
        write = "xv - row_max[None, :] - log_sum[None, :]"
    body += ["for r0 in range(0, R, BLOCK_R):", "    r = r0 + tl.arange(0, BLOCK_R)"]
    body += load_x("    ")
    body.append(f"    res = {write}")
    env = {out: "res"}
    space = IndexSpace(rank, "x_offs", "x_mask", x_sizes, x_axes)
    body += [f"    {line}" for line in epi.emit(space, env)]
    for o_name, v in zip(outs, stores):
        body.append(f"    tl.store({o_name}_out + x_offs, {env[v]}, mask=x_mask)")
    return body
