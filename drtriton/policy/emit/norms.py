"""Layer, RMS, group and instance normalisation: statistics per row, then the affine map.

The input X (contiguous, or computed by a fused prologue as it is read) is viewed as (O, R), a
row being what one mean and variance cover: layer/RMS norm O = the leading dims, R = the
normalised ones; group norm O = N * G, R = C/G * S (S the spatial size); instance norm O = N * C,
R = S. Two templates, chosen by R at capture:

- short rows (R <= MAX_SHORT_ROW): one kernel; a program holds BLOCK_O whole rows in registers:
  one read, exact two-pass statistics in registers, one write.
- long rows: three kernels. stats: a program per (row, chunk of R) merges the chunk's tiles
  (exact two-pass statistics within a tile) with Chan's formula into a partial (count, mean,
  M2); finish: per row, the chunks merged in order (deterministic) into mean and 1/std; apply:
  y = (x - mean) * rstd * w + b and the epilogue, over the output as rows of its leading dims
  (for group and instance norm one row per (n, c), so the statistics and affine parameters are
  scalar loads and the spatial elements contiguous). Chunks give a GPU enough programs when
  there are few rows (group norm of a large tensor: N * G rows of a million elements).
"""

from __future__ import annotations

import math

from ..pointwise import Axes, IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import MAX_GRID_1, WIDE, Emitted, Names, Unsupported, chan_merge, input_launch, row_blocks
from . import empty, require_private_prologue, stored_values

NORMS = {"layer_norm", "rms_norm", "group_norm", "instance_norm"}
#: rows up to this many elements are held in registers whole
MAX_SHORT_ROW = 4096
#: elements a program holds: BLOCK_O short rows of BLOCK_R
SHORT_TILE = 4096
#: the stats kernel aims for about this many programs (rows x chunks)...
TARGET_PROGRAMS = 2048
#: ... with chunks of at least this many elements
MIN_CHUNK = 8192
#: apply runs one row per (n, c) when a channel has at least this many elements
MIN_APPLY_ROW = 512
#: the stats and apply kernels' block
BLOCK = 1024


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def _eps(node) -> float:
    eps = node.attrs.get("eps")
    return 1.1920928955078125e-07 if eps is None else float(eps)  # rms_norm's default: finfo.eps


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op = node.op
    if op not in NORMS:
        raise Unsupported(op)
    ins = program.inputs_of(node)
    x = ins[0]
    xs = list(program.values[x].shape)
    rank = len(xs)
    if not xs:
        raise Unsupported("a scalar input")
    if program.values[x].dtype != "torch.float32":
        raise Unsupported("non-fp32 input")
    out = node.outputs[0]
    stores = stored_values(program, frag, xs)
    require_private_prologue(program, frag)
    if op in ("layer_norm", "rms_norm"):
        first = rank - node.attrs["normalized_dims"]
    else:
        first = 2 if op == "instance_norm" else 1
        if rank < 2:
            raise Unsupported(f"{op} of a rank-1 input")
    groups = node.attrs.get("num_groups", 1) if op == "group_norm" else 1
    # a weight and a bias, each optional (LayerNorm and InstanceNorm take bias=False; F.layer_norm
    # a bias without a weight)
    affine = bool(node.attrs.get("affine"))
    has_bias = op != "rms_norm" and bool(node.attrs.get("has_bias", affine))
    per_channel = affine or has_bias
    centred = op != "rms_norm"
    R = math.prod(xs[first:]) if op != "group_norm" else math.prod(xs[1:]) // groups

    reserved = {"x_ptr", "w_ptr", "b_ptr", "part_ptr", "stat_ptr"}
    pro = PointwiseBlock(program, frag.prologue, xs, reserved=reserved)
    epi = PointwiseBlock(program, frag.epilogue, xs, known={out}, reserved=reserved | set(pro.params()))
    sizes = [f"xsize{d}" for d in range(1, rank)]
    outs = [program.expr(o) for o in stores]
    x_params = pro.params() if frag.prologue else ["x_ptr"]
    wb_params = (["w_ptr"] if affine else []) + (["b_ptr"] if has_bias else [])
    out_params = epi.params() + [f"{o}_out" for o in outs]
    geometry = ["G", "C_per_group", "spatial"] if op == "group_norm" else []

    def load_x(offs: str, mask: str, axes: list[Axes]) -> list[str]:
        if not frag.prologue:
            return [f"xv = tl.load(x_ptr + {offs}, mask={mask}, other=0.0)"]
        env: dict[str, str] = {}
        return pro.emit(IndexSpace(rank, offs, mask, sizes, axes), env) + [f"xv = {env[x]}"]

    def row_axes(o: str, r: str, scalar: bool) -> tuple[list[str], list[Axes]]:
        """Where element r of row o is (lines declaring what group norm needs, axes)."""
        if op == "group_norm":
            lines = [f"ch = ({o} % G) * C_per_group + {r} // spatial  # its channel"]
            axes = [Axes(f"{o} // G", 0, 0, scalar=scalar), Axes("ch", 1, 1)]
            if rank > 2:
                lines.append(f"sp = {r} % spatial  # its position in the channel")
                axes.append(Axes("sp", 2, rank - 1))
            return lines, axes
        return [], [a for a in (Axes(o, 0, first - 1, scalar=scalar), Axes(r, first, rank - 1)) if a.first <= a.last]

    def affine_map(res: str, widx: str, mask: str | None) -> str:
        m = f", mask={mask}, other=0.0" if mask else ""
        res = f"{res} * tl.load(w_ptr + {widx}{m})" if affine else res
        return f"{res} + tl.load(b_ptr + {widx}{m})" if has_bias else res

    def store(env: dict, offs: str, mask: str) -> list[str]:
        return [f"tl.store({o}_out + {offs}, {env[v]}, mask={mask})" for o, v in zip(outs, stores)]

    what = f"X viewed as (O, R) = ({math.prod(xs) // R}, {R}) at capture"
    label = f"{frag.label}: Triton, {'fused ' if len(frag.nodes) > 1 else ''}{op}"
    lines = [f"# {label}"]
    pre, device, xargs = input_launch(program, pro if frag.prologue else None, x)
    lines += pre
    lines.append(f"_O, _R = {_rows_source(op, first, groups)}")
    for o, v in zip(outs, stores):
        lines.append(f"{o} = {empty('_xs', len(program.values[v].shape), device, 'torch.float32')}")
    wb_args = [program.expr(v) for v in ins[1:1 + len(wb_params)]]
    epi_pre, epi_args = epi.launch_args(f"{outs[0]}.shape")
    lines += epi_pre
    geometry_args = ([str(groups), f"_xs[1] // {groups}", "math.prod(_xs[2:])"] if op == "group_norm" else [])
    size_args = ["*_xs[1:]"] if rank > 1 and (frag.prologue or frag.epilogue) else []
    kernel_sizes = sizes if frag.prologue or frag.epilogue else []

    if R <= MAX_SHORT_ROW:
        name = names.kernel(frag.label)
        where, axes = row_axes("o[:, None]", "r[None, :]", scalar=False)
        widx = "ch" if op == "group_norm" else ("(o % xsize1)[:, None]" if op == "instance_norm" else "r[None, :]")
        if op == "instance_norm" and per_channel:
            kernel_sizes = sizes
            size_args = ["*_xs[1:]"]
        body = ["o = (tl.program_id(0) * BLOCK_O + tl.arange(0, BLOCK_O)).to(tl.int64)",
                "r = tl.arange(0, BLOCK_R)",
                "x_mask = (o < O)[:, None] & (r < R)[None, :]",
                "x_offs = o[:, None] * R + r[None, :]",
                *(where if per_channel or frag.prologue or frag.epilogue else []),
                *load_x("x_offs", "x_mask", axes)]
        if centred:
            body += ["mean = tl.sum(tl.where(x_mask, xv, 0.0), axis=1) / R",
                     "d = tl.where(x_mask, xv - mean[:, None], 0.0)"]
        else:
            body += ["d = tl.where(x_mask, xv, 0.0)"]
        body += [f"rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / R + {_eps(node)!r})",
                 f"res = {affine_map('d * rstd[:, None]', widx, 'x_mask')}"]
        env = {out: "res"}
        body += epi.emit(IndexSpace(rank, "x_offs", "x_mask", sizes, axes), env)
        body += store(env, "x_offs", "x_mask")
        params = x_params + wb_params + out_params + ["O", "R"] + geometry + kernel_sizes
        kernel = ["@triton.jit",
                  f"def {name}({', '.join(params)}, BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr):",
                  f"    # {frag.label}: {what}; a program holds BLOCK_O whole rows: one read, one write",
                  *(f"    {line}" for line in body)]
        lines += ["_BR = _next_pow2(_R)",
                  f"_BO = max(1, {SHORT_TILE} // _BR)",
                  f"{name}[(_cdiv(_O, _BO),)]({', '.join(xargs + wb_args + epi_args + outs + ['_O', '_R'] + geometry_args + size_args)}, "
                  "BLOCK_O=_BO, BLOCK_R=_BR, num_warps=8 if _BR >= 2048 else 4)"]
        return Emitted(["\n".join(kernel)], lines)

    # long rows: stats, finish, apply
    stats, finish, apply = (names.kernel(f"{frag.label} {part}") for part in ("stats", "finish", "apply"))
    where, axes = row_axes("o", "r", scalar=True)
    s_body = ["o = tl.program_id(0).to(tl.int64)",
              "chunk = tl.cdiv(tl.cdiv(R, tl.num_programs(1)), BLOCK) * BLOCK",
              "lo = tl.program_id(1) * chunk",
              "hi = tl.minimum(lo + chunk, R)",
              "count = tl.zeros((1,), tl.float32)",
              "mean = tl.zeros((1,), tl.float32)",
              "m2 = tl.zeros((1,), tl.float32)",
              "for r0 in range(lo, hi, BLOCK):",
              "    r = r0 + tl.arange(0, BLOCK)",
              "    x_mask = r < hi",
              "    x_offs = o * R + r",
              *(f"    {line}" for line in (where if frag.prologue else []) + load_x("x_offs", "x_mask", axes)),
              "    n_t = tl.minimum(hi - r0, BLOCK).to(tl.float32)",
              "    mean_t = tl.sum(tl.where(x_mask, xv, 0.0), axis=0, keep_dims=True) / n_t",
              "    d = tl.where(x_mask, xv - mean_t, 0.0)",
              "    m2_t = tl.sum(d * d, axis=0, keep_dims=True)",
              "    # merge the tile's (n_t, mean_t, m2_t) into the chunk's statistics",
              *(f"    {line}" for line in chan_merge("n_t", "mean_t", "m2_t")),
              "part = o * tl.num_programs(1) + tl.program_id(1) + tl.arange(0, 1)  # part[o, chunk]",
              "tl.store(part_ptr + part, count)",
              "tl.store(part_ptr + PARTS + part, mean)",
              "tl.store(part_ptr + 2 * PARTS + part, m2)"]
    kernels = ["\n".join([
        "@triton.jit",
        f"def {stats}({', '.join(x_params + ['part_ptr', 'R', 'PARTS'] + geometry + (sizes if frag.prologue else []))}, "
        "BLOCK: tl.constexpr):",
        f"    # {frag.label}, statistics: {what}; a program per (row, chunk of R) stores the chunk's",
        "    # partial (count, mean, M2)",
        *(f"    {line}" for line in s_body)])]
    var = "m2 / count" if centred else "m2 / count + mean * mean  # the mean square"
    kernels.append("\n".join([
        "@triton.jit",
        f"def {finish}(part_ptr, stat_ptr, O, SPLIT, BLOCK: tl.constexpr):",
        f"    # {frag.label}: per row, the SPLIT partials merged in order (deterministic): mean, 1/std",
        "    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "    o_mask = o < O",
        "    count = tl.zeros((BLOCK,), tl.float32)",
        "    mean = tl.zeros((BLOCK,), tl.float32)",
        "    m2 = tl.zeros((BLOCK,), tl.float32)",
        "    for p in range(0, SPLIT):",
        "        part = o * SPLIT + p",
        "        n_p = tl.load(part_ptr + part, mask=o_mask, other=0.0)",
        "        mean_p = tl.load(part_ptr + O * SPLIT + part, mask=o_mask, other=0.0)",
        "        m2_p = tl.load(part_ptr + 2 * O * SPLIT + part, mask=o_mask, other=0.0)",
        *(f"        {line}" for line in chan_merge("n_p", "mean_p", "m2_p")),
        f"    var = {var}",
        f"    tl.store(stat_ptr + o, {'mean' if centred else 'tl.zeros_like(mean)'}, mask=o_mask)",
        f"    tl.store(stat_ptr + O + o, 1.0 / tl.sqrt(var + {_eps(node)!r}), mask=o_mask)"]))

    # apply: rows of dims 0..k-1 (one per (n, c) for group and instance norm when channels are long)
    S = math.prod(xs[2:])
    if op in ("layer_norm", "rms_norm"):
        k, row_stat, widx, wscalar = first, "o = row", "cols", False
    elif S >= MIN_APPLY_ROW:
        k, wscalar, widx = 2, True, "c"
        row_stat = ("c = row % xsize1\n" + ("o = row" if op == "instance_norm" else
                    f"o = (row // xsize1) * {groups} + c // (xsize1 // {groups})  # the (n, group) row of its statistics"))
    else:
        k, wscalar, widx = 1, False, "c"
        row_stat = ("c = cols // spatial\n" + ("o = row * xsize1 + c" if op == "instance_norm" else
                    f"o = row * {groups} + c // (xsize1 // {groups})  # the (n, group) row of its statistics"))
    if -(-math.prod(xs[k:]) // BLOCK) > MAX_GRID_1:
        raise Unsupported(f"apply rows of {math.prod(xs[k:])} elements: more blocks than the grid holds")
    row_lines, a_axes = row_blocks(k, rank)
    a_body = [*row_lines,
              *row_stat.split("\n"),
              *load_x("offs", "mask", a_axes)]
    stat_mask = "" if k == 2 or op in ("layer_norm", "rms_norm") else ", mask=mask, other=0.0"
    a_body += [f"mean = tl.load(stat_ptr + o{stat_mask})",
               f"rstd = tl.load(stat_ptr + O + o{stat_mask})",
               f"res = {affine_map('(xv - mean) * rstd', widx, None if wscalar else 'mask')}"]
    env = {out: "res"}
    a_body += epi.emit(IndexSpace(rank, "offs", "mask", sizes, a_axes), env)
    a_body += store(env, "offs", "mask")
    a_params = (x_params + wb_params + ["stat_ptr"] + out_params + ["O", "inner"]
                + (["spatial"] if k == 1 and op in ("group_norm", "instance_norm") else []) + sizes)
    kernels.append("\n".join([
        "@triton.jit",
        f"def {apply}({', '.join(a_params)}, WIDE: tl.constexpr, BLOCK: tl.constexpr):",
        f"    # {frag.label}: y = (x - mean) * rstd{' * w' if affine else ''}{' + b' if has_bias else ''}"
        + (", then the epilogue" if frag.epilogue else "") + f"; a program per (row of dims 0..{k - 1}, block)",
        *(f"    {line}" for line in a_body)]))

    lines += [f"_SPLIT = max(1, min(_R // {MIN_CHUNK}, {TARGET_PROGRAMS} // max(_O, 1)))  # chunks of a row",
              f"_part = torch.empty(3, _O, _SPLIT, device={device}, dtype=torch.float32)  # count, mean, M2",
              f"{stats}[(_O, _SPLIT)]({', '.join(xargs + ['_part', '_R', '_O * _SPLIT'] + geometry_args + (['*_xs[1:]'] if frag.prologue else []))}, "
              f"BLOCK={BLOCK})",
              f"_stat = torch.empty(2, _O, device={device}, dtype=torch.float32)  # mean, 1/std per row",
              f"{finish}[(_cdiv(_O, 128),)](_part, _stat, _O, _SPLIT, BLOCK=128)",
              f"_inner = math.prod(_xs[{k}:])",
              "_n = math.prod(_xs)"]
    a_args = xargs + wb_args + ["_stat"] + epi_args + outs + ["_O", "_inner"]
    a_args += (["math.prod(_xs[2:])"] if k == 1 and op in ("group_norm", "instance_norm") else []) + ["*_xs[1:]"]
    lines.append(f"{apply}[(_n // max(_inner, 1), _cdiv(_inner, {BLOCK}))]({', '.join(a_args)}, "
                 f"WIDE=_n > {WIDE}, BLOCK={BLOCK})")
    return Emitted(kernels, lines)


def _rows_source(op: str, first: int, groups: int) -> str:
    """(O, R) from the input's shape `_xs`, in forward."""
    if op == "group_norm":
        return f"_xs[0] * {groups}, math.prod(_xs[1:]) // {groups}"
    return f"math.prod(_xs[:{first}]), math.prod(_xs[{first}:])"
