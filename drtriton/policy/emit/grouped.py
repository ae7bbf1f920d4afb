"""The grouped matrix product of a mixture of experts (`grouped_mm`): rows sorted by group, each
group's rows through its own weights, in one launch.

out[r] = x[r] @ w[g] for the rows r of group g, ends[g - 1] <= r < ends[g]; rows past the last end
are 0 (transformers' `grouped_mm_fallback`). The ends are data (a cumsum of counts computed on
the device), so the host never reads them: the grid holds an upper bound of the row tiles,
cdiv(M, BM) + G + 1 (each group's last tile may be partial; the rows past the last end are one
group more, of zeros), and each program finds its group from the ends: the tiles per group, a
cumsum, and the group whose tiles hold this program's. Programs past the last tile store nothing.
The ends are sorted, as every caller computes them (a cumsum of counts); unsorted ones would give
groups overlapping rows.
Each tile's rows are one group's, so a row is computed once (a product of every row with every
expert's weights costs G times the FLOPs). The epilogue (the routing weights' product) runs on
the tile before the single store, as in `matmul`.
"""

from __future__ import annotations

from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, autotune, empty, pow2, stored_values
from .matmul import TILES, k_loop


def _operands(program: Program, frag: Fragment) -> tuple[str, str, str]:
    x, w, ends = program.inputs_of(frag.anchor)
    if any(program.values[v].dtype != "torch.float32" for v in (x, w)):
        raise Unsupported("non-fp32 grouped_mm")
    return x, w, ends


def configs(program: Program, frag: Fragment) -> list[dict]:
    _operands(program, frag)
    return [{"precision": "ieee"}, {"precision": "tf32x3"}]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    x, w, ends = _operands(program, frag)
    out = frag.anchor.outputs[0]
    so = program.values[out].shape
    groups = program.values[w].shape[0]
    if not isinstance(groups, int):
        raise Unsupported("a symbolic group count")
    epi = PointwiseBlock(program, frag.epilogue, so, known={out}, reserved={"x_ptr", "w_ptr", "ends_ptr"})
    stores = stored_values(program, frag, so)
    outs = [program.expr(o) for o in stores]
    name = names.kernel(frag.label)
    prec = config["precision"]
    space = IndexSpace(2, "c_offs", "c_mask", ["size1"])
    env = {out: "acc"}
    epi_lines = epi.emit(space, env)
    params = ["x_ptr", "w_ptr", "ends_ptr", *epi.params(), *(f"{o}_out" for o in outs), "M", "N", "K", "G",
              "stride_am", "stride_ak", "stride_bg", "stride_bk", "stride_bn", "size1"]
    kernel = autotune(TILES, ["M", "N", "K", "G"], device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, "
        "BLOCK_G: tl.constexpr):",
        f"    # {frag.label}: each group's rows through its weights, then the epilogue, one store",
        "    pid = tl.program_id(0)",
        "    # group g's rows: from the previous end to its end (group G: the rows past the last end)",
        "    g = tl.arange(0, BLOCK_G)",
        "    ends = tl.minimum(tl.load(ends_ptr + g, mask=g < G, other=M), M).to(tl.int32)",
        "    starts = tl.minimum(tl.load(ends_ptr + g - 1, mask=(g > 0) & (g <= G), other=0), M).to(tl.int32)",
        "    tiles = tl.where(g <= G, tl.cdiv(tl.maximum(ends - starts, 0), BM), 0)",
        "    after = tl.cumsum(tiles, 0)  # the tiles of groups 0..g",
        "    grp = tl.sum((after <= pid).to(tl.int32))  # this program's group (past the last tile: above G)",
        "    mine = g == grp",
        "    first_tile = tl.sum(tl.where(mine, after - tiles, 0))",
        "    start = tl.sum(tl.where(mine, starts, 0))",
        "    end = tl.sum(tl.where(mine, ends, 0))",
        "    rm = start + (pid - first_tile) * BM + tl.arange(0, BM)",
        "    rows = (rm < end) & (grp <= G)",
        "    rn = tl.program_id(1) * BN + tl.arange(0, BN)",
        "    rk = tl.arange(0, BK)",
        "    acc = tl.zeros((BM, BN), dtype=tl.float32)  # (the rows past the last end stay 0)",
        "    if grp < G:  # the tile's rows past its group's end read another group's: never stored",
        "        a_rows = x_ptr + rm[:, None].to(tl.int64) * stride_am",
        "        b_cols = w_ptr + grp.to(tl.int64) * stride_bg + rn[None, :] * stride_bn",
        *(f"        {line}" for line in k_loop(None, prec, "0", "K")),
        "    c_mask = rows[:, None] & (rn[None, :] < N)",
        "    c_offs = rm[:, None].to(tl.int64) * N + rn[None, :]",
        *(f"    {line}" for line in epi_lines),
        *(f"    tl.store({o}_out + c_offs, {env[v]}, mask=c_mask)" for o, v in zip(outs, stores)),
    ]
    ex, ew, ee = program.expr(x), program.expr(w), program.expr(ends)
    lines = [f"# {frag.label}: Triton, a tile of one group's rows per program, tl.dot ({prec})"
             + (" with a fused epilogue" if frag.epilogue else ""),
             f"_x, _w, _ends = {ex}, {ew}, {ee}",
             "_M, _K = _x.shape",
             "_G, _, _N = _w.shape",
             f"if _w.shape[1] != _K or _ends.shape != (_G,) or _G != {groups}:  # (BLOCK_G holds {groups} + 1)",
             f"    raise ValueError(f\"{frag.label}: rows of {{_K}} features, weights of shape {{tuple(_w.shape)}} and "
             "{tuple(_ends.shape)} group ends do not fit\")",
             *(f"{o} = {empty('(_M, _N)', 2, '_x.device', 'torch.float32')}" for o in outs)]
    prelude, args = epi.launch_args(f"{outs[0]}.shape")
    lines += prelude
    call = ["_x", "_w", "_ends", *args, *outs, "_M", "_N", "_K", "_G", "*_x.stride()", "*_w.stride()", "_N"]
    lines += [f"_grid = lambda meta: (_cdiv(_M, meta['BM']) + _G + 1, _cdiv(_N, meta['BN']))",
              f"{name}[_grid]({', '.join(call)}, BLOCK_G={pow2(groups + 1)})"]
    return Emitted(["\n".join(kernel)], lines)
