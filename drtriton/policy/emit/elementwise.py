"""A fragment of elementwise operators as one kernel over the output.

Operands of the output's shape are read at the element's offset; broadcast ones (a per-channel
bias) through their strides, along the dimensions where they change. Two layouts:

- rows: when the trailing dimensions hold enough elements, a program owns BLOCK consecutive
  elements of one row of them. Rows end after the last dimension a broadcast operand changes
  along (a bias over (N, C, H, W) varies along N, C; H*W follow): its offset comes from the row
  number, once per program, a scalar load. An operand that changes along the last dimension
  makes every other dimension a row, and reads its column at `cols` times its stride. No
  per-element division.
- tiles: when an operand read through its strides is laid out contiguously along another dim
  than the output's last (`x + y.transpose(1, 2)`, a permuted NCHW tensor beside NHWC), a
  program owns a BT x BC tile of that dim and the last (Inductor's tiled pointwise): each load
  and the store run along their own contiguous dim, Triton moving the tile between the two
  layouts through shared memory. A flat block reads such an operand 32 rows apart per warp, at
  half the bandwidth (1.7 against 3.7 TB/s on an H200, session 37).
- flat: otherwise, BLOCK consecutive elements of the flat output; a broadcast operand's indices
  come from dividing the offset.

Offsets are 32-bit unless the output has more than 2**30 elements (WIDE): 64-bit division costs
several times more. Every value the rest of the program needs is stored, so a fused chain never
recomputes or re-reads.
"""

from __future__ import annotations

import math

from ..pointwise import IndexSpace, PointwiseBlock, fast_dim
from ..program import Fragment, Program
from . import (MAX_GRID_1, WIDE, WIDE_ELEMENTS, Emitted, Names, allocate_outputs, flat_blocks, row_blocks,
               stored_values, tile_blocks)

# One configuration, as Inductor launches pointwise kernels: a bandwidth-bound kernel runs within
# a few percent of its best at 1024 elements and 4 warps a program, while an autotuner costs
# every call its key and lookup (about 7 us of host time, session 11), which a one-kernel call
# pays in full. Rows of fewer elements take half blocks.
BLOCK, NUM_WARPS = 1024, 4
#: the rows layout needs at least this many elements a row (fewer: most of a block is masked)
MIN_ROW = 512
#: the tiles layout: a tile's sides (at most; a power of two at least the dim's size below it)
#: and the shortest dims worth one (4 warps: about 3.6 TB/s at 32-128 a side, session 37)
TILE, MIN_TILE = 64, 16


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def row_split(block: PointwiseBlock) -> int | None:
    """The number of leading dimensions that make a row for the rows layout, or None for flat.
    Rows end after the last dimension a broadcast operand changes along; where one changes
    along the last dimension itself (a (16, 1, 1024) beside a (1, 256, 1)), rows are every
    dimension but the last, whose index is the column: no division per element either way."""
    shape = block.shape
    varying = [d for v in block.operands + block.recomputed if not block.full(v) for d in block.varying(v)]
    if not varying:
        return None  # no broadcast operand to index: flat is as good
    k = min(max(varying) + 1, len(shape) - 1)
    if None in shape[k:]:
        return None  # (a size known only at the call: a compaction's count)
    inner = math.prod(shape[k:])
    if k < 1 or inner < MIN_ROW or -(-inner // BLOCK) > MAX_GRID_1:
        return None
    return k


def tile_dim(block: PointwiseBlock) -> int | None:
    """The output dim, other than the last, along which an operand read through its strides is
    laid out contiguously (a transpose's) and changes, as the last dim does: the tiles layout
    over it and the last; None where no operand is so, or a side would be short."""
    shape, rank = block.shape, len(block.shape)
    if rank < 2 or None in shape or shape[-1] < MIN_TILE:
        return None
    for v in block.operands:
        f = None if block.full(v) else fast_dim(block.program, v)
        if f is None:
            continue
        t, varying = f + rank - len(block.program.values[v].shape), block.varying(v)
        if t == rank - 1 or t not in varying or rank - 1 not in varying or shape[t] < MIN_TILE:
            continue
        # the tiles along each side are a grid axis of at most MAX_GRID_1 programs: sizes known
        # at conversion (a symbolic one, the batch, may grow past it)
        sides = (t, rank - 1)
        if any(d in block.broadcast.symbolic or -(-shape[d] // TILE) > MAX_GRID_1 for d in sides):
            continue
        return t
    return None


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    shape = list(program.values[frag.nodes[-1].outputs[0]].shape)
    stores = stored_values(program, frag, shape)
    block = PointwiseBlock(program, frag.nodes, shape)
    rank = len(shape)
    sizes = [f"size{d}" for d in range(1, rank)]
    name = names.kernel(frag.label)
    outs = [program.expr(o) for o in stores]
    t = tile_dim(block)
    k = row_split(block) if t is None else None
    what = "x".join(map(str, shape)) or "a scalar"
    if t is not None:
        params = block.params() + [f"{o}_out" for o in outs] + ["size0"] + sizes + ["mid"]
        tile_lines, axes = tile_blocks(t, rank)
        space = IndexSpace(rank, "offs", "mask", sizes, axes)
        head = [f"    # {frag.label}, fused: one pass over {what} elements, as tiles of dims {t} and {rank - 1}",
                f"    # (an operand laid out contiguously along dim {t} is read along it)",
                *(f"    {line}" for line in tile_lines)]
    elif k is None:
        params = block.params() + [f"{o}_out" for o in outs] + ["n"] + sizes
        space = IndexSpace(rank, "offs", "mask", sizes)
        head = [f"    # {frag.label}, fused: one pass over {what} elements",
                *(f"    {line}" for line in flat_blocks())]
    else:
        params = block.params() + [f"{o}_out" for o in outs] + ["inner"] + sizes
        row_lines, axes = row_blocks(k, rank)
        space = IndexSpace(rank, "offs", "mask", sizes, axes)
        head = [f"    # {frag.label}, fused: one pass over {what} elements, as rows of dims 0..{k - 1}",
                f"    # (broadcast operands: a scalar per row, or a column) by the {math.prod(shape[k:])} elements "
                "of the dims after them",
                *(f"    {line}" for line in row_lines)]
    body = block.emit(space, {})
    blocks = "BT: tl.constexpr, BC: tl.constexpr" if t is not None else "BLOCK: tl.constexpr"
    kernel = [
        "@triton.jit",
        f"def {name}({', '.join(params)}, WIDE: tl.constexpr, {blocks}):",
        *head,
        *(f"    {line}" for line in body),
        *(f"    tl.store({o}_out + offs, {o}, mask=mask)" for o in outs),
    ]
    ref = block.shape_source()
    made, args, size_args = allocate_outputs(program, outs, stores, ref, block.device(), block, rank)
    lines = [f"# {frag.label}: Triton, one kernel"] + made
    if t is not None:
        o = outs[0]
        lines += [f"_st, _sc = {o}.shape[{t}], {o}.shape[{rank - 1}]",
                  f"_bt, _bc = min({TILE}, _next_pow2(_st)), min({TILE}, _next_pow2(_sc))"]
        grid = "(_n // max(_st * _sc, 1), _cdiv(_st, _bt), _cdiv(_sc, _bc))"
        # size0 before the other sizes, `mid` after them
        counts, after, sized = [f"{o}.shape[0]"], [f"math.prod({o}.shape[{t + 1}:{rank - 1}])"], "BT=_bt, BC=_bc"
    elif k is None:
        grid, counts, after, sized = f"(_cdiv(_n, {BLOCK}),)", ["_n"], [], f"BLOCK={BLOCK}"
    else:
        lines.append(f"_inner = math.prod({outs[0]}.shape[{k}:])")
        lines.append(f"_block = {BLOCK} if _inner > {BLOCK // 2} else {BLOCK // 2}")
        grid, counts, after, sized = "(_n // max(_inner, 1), _cdiv(_inner, _block))", ["_inner"], [], "BLOCK=_block"
    wide = " or ".join([f"_n > {WIDE}"] + [f"{e}.numel() > {WIDE}" for e in block.reach(WIDE_ELEMENTS)])
    lines.append(f"{name}[{grid}]({', '.join(args + outs + counts + size_args + after)}, WIDE={wide}, "
                 f"{sized}, num_warps={NUM_WARPS})")
    return Emitted(["\n".join(kernel)], lines)

