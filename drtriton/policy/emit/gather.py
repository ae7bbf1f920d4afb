"""Indexing and data movement (cat, stack, flip, index_select, gather, embedding, x[i, :, j]) as one kernel
over the output, with the pointwise epilogue after it fused in.

Each output element is one element of an input: its position along every output dimension
comes from the flat offset (`IndexSpace`), and the input element is read through that input's
strides at a position derived from it. `cat` and `stack` with an epilogue read each input under
a mask of the positions it covers; without one (the common case: their elementwise readers read
them in place, so a cat left alone feeds a template) each input is copied into its place, a tile
of one input per program (`_copied`); `flip` mirrors the flipped axes; `index_select`, `gather` and `embedding`
first read the position along their axis from the index tensor; `bucketize` searches the
boundaries for each element's bucket. Inputs keep their strides
(a transposed or sliced input is read as it is), so nothing is copied before the kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import recompute
from ...capture import VIEWS
from ..pointwise import Broadcast, IndexSpace, PointwiseBlock, shape_check
from ..program import Fragment, Program
from . import DATA_SIZE, WIDE, Emitted, Names, Unsupported, allocate_outputs, autotune, empty, flat_blocks, pow2, stored_values

BLOCKS = [{"BLOCK": b, "num_warps": w} for b, w in [(1024, 4), (512, 4), (2048, 8)]]


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


@dataclass
class Source:
    """How the anchor reads its inputs: kernel parameters, kernel lines that leave the element
    in `val`, and on the launch side the arguments and the output shape (a forward expression)."""

    params: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    out_shape: str = ""
    prelude: list[str] = field(default_factory=list)  # forward lines before the output shape
    checks: list[str] = field(default_factory=list)  # forward lines after it (checks against it)


def _tensor(src: Source, name: str, expr: str, rank: int) -> list[str]:
    """A strided input: its pointer and one stride parameter per dimension."""
    src.params += [f"{name}_ptr"] + [f"{name}_s{d}" for d in range(rank)]
    src.args += [expr, f"*{expr}.stride()"]
    return [f"{name}_s{d}" for d in range(rank)]


def _offset(terms: list[tuple[str, str]]) -> str:
    # no terms (a 0-d index): one element for every lane, a block like the mask
    return " + ".join(f"{i} * {s}" for i, s in terms) or "offs * 0"


def index_tensors(program: Program, src: Source, values: list[str], space: IndexSpace, first: int) -> list[str]:
    """x[i, j]'s index tensors, broadcast together (PyTorch's rule) into output dims `first`...:
    in forward, their broadcast shape `_ishape` taken from their sizes and a check of each one's
    shape; in the kernel, each read through its own strides along the dims it varies in, or
    computed there when it is index arithmetic (`recompute`). Returns each one's value at the
    element as a kernel expression."""
    bc = Broadcast.of(program, values)
    src.prelude.append(f"_ishape = {bc.shape_source(values)}")
    reads = []
    for k, v in enumerate(values):
        dims = bc.varying(v)
        if program.is_recomputed(v):  # its dims are the output's from first on, aligned right
            lead = first + len(bc.shape) - len(program.values[v].shape)
            reads.append(_position(program, src, f"i{k}", v, list(range(lead, lead + len(program.values[v].shape))),
                                   space))
            continue
        lines, args = bc.strided_args(v, "_ishape", f"_i{k}", program.tensor_expr(v), "indices broadcast to a shape")
        src.prelude += lines
        src.params += [f"i{k}_ptr"] + [f"i{k}_s{e}" for e in range(len(bc.shape))]
        src.args += args
        position = _offset([(space.index(first + e), f"i{k}_s{e}") for e in dims])
        reads.append(f"tl.load(i{k}_ptr + {position}, mask=mask, other=0)")
    return reads


def _joined_inputs(program: Program, node) -> list[str]:
    """cat's or stack's tensors, of one dtype (PyTorch promotes mixed ones: left to it)."""
    tensors = [a["value"] for a in node.args[0]]
    if len({program.values[t].dtype for t in tensors}) > 1:
        raise Unsupported(f"{node.op} of tensors of different dtypes (PyTorch promotes them)")
    return tensors


def _joined_shape(exprs: list[str], dim: int, stack: bool) -> str:
    """cat's or stack's output shape as forward computes it from its inputs (forward expressions)."""
    if stack:
        return f"[*{exprs[0]}.shape[:{dim}], {len(exprs)}, *{exprs[0]}.shape[{dim}:]]"
    total = " + ".join(f"{e}.shape[{dim}]" for e in exprs)
    return f"[*{exprs[0]}.shape[:{dim}], {total}, *{exprs[0]}.shape[{dim + 1}:]]"


def _joined(program: Program, node, space: IndexSpace, stack: bool) -> Source:
    src = Source()
    tensors = _joined_inputs(program, node)
    dim, rank = node.attrs["dim"], len(space.sizes) + 1
    exprs = [program.expr(t) for t in tensors]
    i_dim = space.index(dim)
    kept = [d for d in range(rank) if d != dim]  # output dims that are input dims, in order
    for k, (t, e) in enumerate(zip(tensors, exprs)):
        in_rank = len(program.values[t].shape)
        strides = _tensor(src, f"in{k}", e, in_rank)
        if stack:
            sel = f"({i_dim} == {k})"
            terms = [(space.index(d), strides[j]) for j, d in enumerate(kept)]
        else:
            src.params.append(f"n{k}")
            src.args.append(f"{e}.shape[{dim}]")
            start = " + ".join(f"n{j}" for j in range(k)) or "0"
            src.lines.append(f"start{k} = {start}")
            sel = f"({i_dim} >= start{k}) & ({i_dim} < start{k} + n{k})"
            terms = [(space.index(d) if d != dim else f"({i_dim} - start{k})", strides[d]) for d in range(rank)]
        load = f"tl.load(in{k}_ptr + {_offset(terms)}, mask=mask & {sel}, other=0)"
        src.lines.append(f"val = {load}" if k == 0 else f"val = tl.where({sel}, {load}, val)")
    src.out_shape = _joined_shape(exprs, dim, stack)
    return src


def _flip(program: Program, node, space: IndexSpace) -> Source:
    src = Source()
    x = node.args[0]["value"]
    e = program.expr(x)
    rank = len(space.sizes) + 1
    strides = _tensor(src, "x", e, rank)
    src.params.append("size0")
    src.args.append(f"{e}.shape[0]")
    sizes = ["size0"] + space.sizes
    terms = [(f"({sizes[d]} - 1 - {space.index(d)})" if d in node.attrs["dims"] else space.index(d), strides[d])
             for d in range(rank)]
    src.lines.append(f"val = tl.load(x_ptr + {_offset(terms)}, mask=mask, other=0)")
    src.out_shape = f"{e}.shape"
    return src


def _position(program: Program, src: Source, name: str, index: str, dims: list[int], space: IndexSpace) -> str:
    """An index tensor's value at the element, its dims being output dims `dims`: read through
    its strides, or computed in the kernel when it is index arithmetic (`recompute`)."""
    if program.is_recomputed(index):
        evaluator = recompute.Evaluator(program, {}, space.mask, f"({space.flat}) * 0", f"_{name}")
        value = evaluator.at(index, recompute.aligned(program, index, [space.index(d) for d in dims]))
        src.lines += evaluator.lines
        return f"{value} + ({space.flat}) * 0"  # a block, though the position may be one number
    strides = _tensor(src, name, program.tensor_expr(index), len(dims))
    return f"tl.load({name}_ptr + {_offset([(space.index(d), s) for d, s in zip(dims, strides)])}, mask=mask, other=0)"


def _picked(program: Program, node, space: IndexSpace) -> Source:
    """index_select, gather and embedding: the position along one input axis read from an index
    tensor (int32 or int64), the other positions from the output's."""
    src = Source()
    rank = len(space.sizes) + 1
    if node.op == "embedding":
        weight, index = node.args[0]["value"], node.args[1]["value"]
        we = program.expr(weight)
        ws = _tensor(src, "w", we, 2)
        row = _position(program, src, "idx", index, list(range(rank - 1)), space)
        src.lines += [f"row = {row}",
                      f"val = tl.load(w_ptr + row * {ws[0]} + {space.index(rank - 1)} * {ws[1]}, mask=mask, other=0)"]
        src.out_shape = f"[*{recompute.shape_source(program, index)}, {we}.shape[1]]"
        return src
    x, dim, index = node.args[0]["value"], node.attrs["dim"], node.args[2]["value"]
    xe = program.expr(x)
    xs = _tensor(src, "x", xe, len(program.values[x].shape))
    index_rank = len(program.values[index].shape)
    if node.op == "index_select":  # a vector of positions along dim (or one, 0-d)
        at = _position(program, src, "idx", index, [dim][:index_rank], space)
        count = math.prod(program.values[index].shape) if program.is_recomputed(index) else \
            f"{program.tensor_expr(index)}.numel()"
        src.out_shape = f"[*{xe}.shape[:{dim}], {count}, *{xe}.shape[{dim + 1}:]]"
    else:  # gather: an index of the output's shape
        at = _position(program, src, "idx", index, list(range(rank)), space)
        src.out_shape = recompute.shape_source(program, index)
    terms = [("at" if d == dim else space.index(d), xs[d]) for d in range(rank)]
    src.lines += [f"at = {at}",
                  f"val = tl.load(x_ptr + {_offset(terms)}, mask=mask, other=0)"]
    return src


def _advanced(program: Program, node, space: IndexSpace) -> Source:
    """x[i, :, j]: the index tensors broadcast together; their dims stand where the indexed axes
    were when those are adjacent, else first (PyTorch's rule); negative positions count from
    the end."""
    src = Source()
    x = node.args[0]["value"]
    xe = program.expr(x)
    x_rank = len(program.values[x].shape)
    entries = node.args[1] + [None] * (x_rank - len(node.args[1]))
    indexed = [d for d, e in enumerate(entries) if e is not None]
    b = max(len(program.values[entries[d]["value"]].shape) for d in indexed)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    first = indexed[0] if adjacent else 0  # where the broadcast dims stand in the output
    xs = _tensor(src, "x", xe, x_rank)
    src.params += [f"x_n{d}" for d in indexed]
    src.args += [f"{xe}.shape[{d}]" for d in indexed]
    reads = index_tensors(program, src, [entries[d]["value"] for d in indexed], space, first)
    rest = iter(d for d in range(len(space.sizes) + 1) if not first <= d < first + b)  # output dims of x's axes
    terms = []
    for d in range(x_rank):
        if d in indexed:
            k = indexed.index(d)
            src.lines += [f"at{k} = {reads[k]}",
                          f"at{k} = tl.where(at{k} < 0, at{k} + x_n{d}, at{k})"]
            terms.append((f"at{k}", xs[d]))
        else:
            terms.append((space.index(next(rest)), xs[d]))
    src.lines.append(f"val = tl.load(x_ptr + {_offset(terms)}, mask=mask, other=0)")
    kept = [f"{xe}.shape[{d}]" for d in range(x_rank) if d not in indexed]
    out = kept[:first] + ["*_ishape"] + kept[first:]
    src.out_shape = "[" + ", ".join(out) + "]"
    return src


def _padded(program: Program, node, space: IndexSpace) -> Source:
    """F.pad, constant mode: the input element `before` places back along each padded axis, or
    the value outside the input (a negative pad crops: the same arithmetic)."""
    src = Source()
    x = node.args[0]["value"]
    xe = program.expr(x)
    rank = len(program.values[x].shape)
    pad, value = node.attrs["pad"], node.attrs["value"]
    xs = _tensor(src, "x", xe, rank)
    inside, terms = [], []
    for d in range(rank):
        k = rank - 1 - d  # pairs count from the last axis
        if k < len(pad) // 2:
            src.params.append(f"x_n{d}")
            src.args.append(f"{xe}.shape[{d}]")
            src.lines.append(f"in{d} = {space.index(d)} - {pad[2 * k]}")
            inside.append(f"(in{d} >= 0) & (in{d} < x_n{d})")
            terms.append((f"in{d}", xs[d]))
        else:
            terms.append((space.index(d), xs[d]))
    src.lines.append(f"inside = {' & '.join(inside)}")
    fill = repr(value) if math.isfinite(value) else (f'float("{value}")')  # inf, -inf, nan
    src.lines.append(f"val = tl.load(x_ptr + {_offset(terms)}, mask=mask & inside, other={fill})")
    grown = [f"{xe}.shape[{d}] + {pad[2 * (rank - 1 - d)] + pad[2 * (rank - 1 - d) + 1]}"
             if rank - 1 - d < len(pad) // 2 else f"{xe}.shape[{d}]" for d in range(rank)]
    src.out_shape = "[" + ", ".join(grown) + "]"
    return src


def _bucketize(program: Program, node, space: IndexSpace) -> Source:
    """Each element's bucket: a binary search over the boundaries, every lane at once, as many
    halvings as the boundaries' length has bits. PyTorch's comparisons (a NaN goes last)."""
    src = Source()
    x, b = node.args[0]["value"], node.args[1]["value"]
    if program.values[x].dtype != program.values[b].dtype:
        raise Unsupported("bucketize with boundaries of another dtype (PyTorch converts them)")
    xe, be = program.tensor_expr(x), program.tensor_expr(b)
    rank = len(program.values[x].shape)
    xs = _tensor(src, "x", xe, rank)
    bs = _tensor(src, "b", be, 1)
    src.params += ["nb", "steps"]
    src.args += [f"{be}.shape[0]", f"{be}.shape[0].bit_length()"]
    # lower bound: step right while not (boundary >= x); upper bound (right=True): not (boundary > x)
    compare = ">" if node.attrs["right"] else ">="
    out = "tl.int32" if node.attrs["out_int32"] else "tl.int64"
    at = _offset([(space.index(d), xs[d]) for d in range(rank)])
    src.lines += [f"xv = tl.load(x_ptr + {at}, mask=mask, other=0)",
                  "lo = (offs * 0).to(tl.int64)",
                  "hi = lo + nb",
                  "for _ in range(0, steps):",
                  "    mid = lo + (hi - lo) // 2",
                  f"    bv = tl.load(b_ptr + mid * {bs[0]}, mask=mask & (lo < hi), other=0)",
                  f"    right = (lo < hi) & ~(bv {compare} xv)",
                  "    hi = tl.where((lo < hi) & ~right, mid, hi)",
                  "    lo = tl.where(right, mid + 1, lo)",
                  f"val = lo.to({out})"]
    src.out_shape = f"{xe}.shape"
    return src


def _source(program: Program, node, space: IndexSpace) -> Source:
    if node.op == "bucketize":
        return _bucketize(program, node, space)
    if node.op in ("cat", "stack"):
        return _joined(program, node, space, stack=node.op == "stack")
    if node.op == "flip":
        return _flip(program, node, space)
    if node.op in ("index_select", "gather", "embedding"):
        return _picked(program, node, space)
    if node.op == "index":
        return _advanced(program, node, space)
    if node.op == "constant_pad":
        return _padded(program, node, space)
    raise Unsupported(f"no indexing template for {node.op}")


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    if node.op in ("cat", "stack") and not frag.epilogue:
        return _copied(program, frag, names)
    anchor_out = node.outputs[0]
    shape = list(program.values[anchor_out].shape)
    if not shape and node.op != "bucketize":  # (its reads take no position from the output)
        raise Unsupported("a 0-d result")
    stores = stored_values(program, frag, shape)
    rank = len(shape)
    sizes = [f"size{d}" for d in range(1, rank)]
    space = IndexSpace(rank, "offs", "mask", sizes)
    src = _source(program, node, space)
    reserved = set(src.params) | {"n", "WIDE", "BLOCK"} | set(sizes)
    block = PointwiseBlock(program, frag.epilogue, shape, known={anchor_out}, reserved=reserved)
    # index lines (declared by the reads and the epilogue's broadcast operands), the reads, the epilogue
    epilogue = block.emit(space, {anchor_out: "val"})[len(space.lines):] if frag.epilogue else []
    kernel_body = space.lines + src.lines + epilogue
    outs = [program.expr(o) for o in stores]
    name = names.kernel(frag.label)
    params = src.params + block.params() + [f"{o}_out" for o in outs] + ["n"] + sizes
    values = {anchor_out: "val", **{o: program.expr(o) for n in frag.epilogue for o in n.outputs}}
    kernel = autotune(BLOCKS, ["n"], device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, WIDE: tl.constexpr, BLOCK: tl.constexpr):",
        f"    # {frag.label}: each output element read from its input, one pass",
        *(f"    {line}" for line in flat_blocks() + kernel_body),
        *(f"    tl.store({o}_out + offs, {values[v]}, mask=mask)" for o, v in zip(outs, stores)),
    ]
    device_expr = f"{program.expr(program.inputs_of(node)[0])}.device"
    made, epilogue_args, size_args = allocate_outputs(program, outs, stores, "_shape", device_expr, block, rank)
    lines = [f"# {frag.label}: Triton, one kernel", *src.prelude, f"_shape = {src.out_shape}"] + made
    grid = "lambda meta: (_cdiv(_n, meta['BLOCK']),)"
    lines.append(f"{name}[{grid}]({', '.join(src.args + epilogue_args + outs + ['_n'] + size_args)}, "
                 f"WIDE=_n > {WIDE})")
    return Emitted(["\n".join(kernel)], lines)


def copy_tile(runs: list[int]) -> tuple[int, int]:
    """(rows, columns) of the copying cat's tile of 1024 elements: as many columns as the
    narrowest input's run along a row (a power of two, at most 1024), rows for the rest, among
    the inputs that hold a fair share of the row (a narrower one is little data: its idle lanes
    cost less than a wide input copied a few columns at a time)."""
    total = sum(runs)
    fair = [w for w in runs if w > 0 and w * 4 * len(runs) >= total]
    cols = min(1024, pow2(min(fair))) if fair else 1
    return 1024 // cols, cols


def cat_rows(t, dim: int):
    """`t` as the copying cat reads an input, rows of its dims from `dim` on, and the stride
    between rows: `t` itself where those dims are contiguous and the dims before `dim` step as
    one axis (a channel slice or chunk of a contiguous tensor), else a contiguous copy. Runs in
    the generated module as `_cat_rows`."""
    shape, stride = t.shape, t.stride()
    run, fits = 1, True
    for d in range(len(shape) - 1, dim - 1, -1):  # the run: contiguous
        fits = fits and (shape[d] == 1 or stride[d] == run)
        run *= shape[d]
    step = span = None
    for d in range(dim - 1, -1, -1):  # the rows: one strided axis
        if shape[d] == 1:
            continue
        if step is None:
            step, span = stride[d], stride[d] * shape[d]
        else:
            fits = fits and stride[d] == span
            span *= shape[d]
    if not fits:
        return t.contiguous(), run
    return t, run if step is None else step


def _tile_sizes(program: Program, value: str) -> list[int]:
    """A value's sizes for choosing a tile: one that follows the batch or the data counts as
    long (the captured batch of 2 says nothing of the one it runs at)."""
    v = program.values[value]
    return [DATA_SIZE if n is None or d in v.symbolic else n for d, n in enumerate(v.shape)]


def _named(program: Program, value: str) -> str:
    """A value as an error message names it: a view of forward's input says of which."""
    base = value
    while (p := program.producer.get(base)) is not None and p.target in VIEWS and program.inputs_of(p):
        base = program.inputs_of(p)[0]
    named = program.expr(value)
    return named if base == value or program.values[base].kind != "input" else f"{named} (a view of {base})"


def _read_in_place(program: Program, value: str) -> bool:
    """Whether the copying cat reads an input through its row stride (`cat_rows`) and checks
    its sizes: a view or forward's own tensor may be a slice, and its sizes are the caller's;
    what a kernel stores is contiguous and sized by the plan (`.contiguous()` returns it as it
    is, cheaper on the host)."""
    producer = program.producer.get(value)
    return producer is None or producer.target in VIEWS


def _copied(program: Program, frag: Fragment, names: Names) -> Emitted:
    """cat / stack with nothing fused after it, as eager's batched copy does it: the output seen
    as (outer, row), outer the dims before `dim` and row the rest, each input an (outer, w_k)
    block of it starting at column start_k, its rows s_k apart (a channel slice is read in
    place). A program copies a (BO, BJ) tile of one input; which input is its id against the
    inputs' running tile counts, a few scalar tests. So an element costs one load and one store,
    with no division and no test of the other inputs (the element-by-element form loads under
    every input's mask: dozens in a DenseNet block)."""
    node = frag.anchor
    stack = node.op == "stack"
    tensors = _joined_inputs(program, node)
    out_value = node.outputs[0]
    rank = len(program.values[out_value].shape)
    dim = node.attrs["dim"] % rank
    exprs = [program.expr(t) for t in tensors]
    parts = len(tensors)
    name = names.kernel(frag.label)
    out = program.expr(out_value)
    # which input this program copies: the last whose first tile is at or before its id
    choose = ["row_tiles = tl.cdiv(outer, BO)",
              "src, t, w, s, dst = in0_ptr, pid, w0 + 0 * pid, s0 + 0 * pid, out_ptr",
              "first = 0",
              "col = tl.full((), 0, tl.int64)  # (the widths before an input may pass 2**31)"]
    for k in range(1, parts):
        choose += [f"first += row_tiles * tl.cdiv(w{k - 1}, BJ)  # input {k}'s first tile",
                   f"col += w{k - 1}  # and its first column",
                   "later = pid >= first",
                   f"src = tl.where(later, in{k}_ptr, src)",
                   "t = tl.where(later, pid - first, t)",
                   f"w = tl.where(later, w{k}, w)",
                   f"s = tl.where(later, s{k}, s)",
                   "dst = tl.where(later, out_ptr + col, dst)"]
    params = [f"in{k}_ptr" for k in range(parts)] + ["out_ptr"] + [f"w{k}" for k in range(parts)] + \
        [f"s{k}" for k in range(parts)] + ["outer", "row"]
    kernel = [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BO: tl.constexpr, BJ: tl.constexpr):",
        f"    # {frag.label}: each input copied into its place, a (BO, BJ) tile of one input per program",
        "    pid = tl.program_id(0)",
        *(f"    {line}" for line in choose),
        "    col_tiles = tl.maximum(tl.cdiv(w, BJ), 1)",
        "    o = ((t // col_tiles) * BO + tl.arange(0, BO)[:, None]).to(tl.int64)  # rows: 64-bit offsets",
        "    j = (t % col_tiles) * BJ + tl.arange(0, BJ)[None, :]",
        "    mask = (o < outer) & (j < w)  # programs past the last input's tiles copy nothing",
        "    tl.store(dst + o * row + j, tl.load(src + o * s + j, mask=mask), mask=mask)",
    ]
    # forward: each input with its row stride (a kernel's output: contiguous, its rows its width),
    # the output, the tile
    locals_ = [f"_in{k}" for k in range(parts)]
    in_place = [_read_in_place(program, t) for t in tensors]
    widths = ["_inner" if stack else f"{l}.shape[{dim}] * _inner" for l in locals_]
    strides = [f"_s{k}" if in_place[k] else widths[k] for k in range(parts)]
    lines = [f"# {frag.label}: Triton, each input copied into its place"]
    lines += [f"_in{k}, _s{k} = _cat_rows({e}, {dim})" if in_place[k] else f"_in{k} = {e}.contiguous()"
              for k, e in enumerate(exprs)]
    first = locals_[0]
    lines.append(f"_shape = {_joined_shape(locals_, dim, stack)}")
    # every input's other dims must be the first's: each is read as a block of the output's rows
    for k in range(1, parts):
        if not in_place[k]:
            continue  # what a kernel of the plan stores: sized as captured, batch and all
        if stack:
            got, want, wanted = f"{locals_[k]}.shape", f"{first}.shape", None
        else:
            got = f"({locals_[k]}.shape[:{dim}], {locals_[k]}.shape[{dim + 1}:])"
            want = f"({first}.shape[:{dim}], {first}.shape[{dim + 1}:])"
            wanted = f"sizes {{tuple({first}.shape[:{dim}])}} before dim {dim} and {{tuple({first}.shape[{dim + 1}:])}} after it"
        lines += shape_check(_named(program, tensors[k]), locals_[k], got, want, "_shape", beside=f"a {node.op}'s output",
                             wanted=wanted)
    lines.append(f"{out} = {empty('_shape', rank, f'{first}.device', program.values[out_value].dtype)}")
    outer = " * ".join(f"_shape[{d}]" for d in range(dim)) or "1"
    inner = " * ".join(f"_shape[{d}]" for d in range(dim + 1, rank)) or "1"
    lines += [f"_outer, _inner = {outer}, {inner}",
              f"_row = _shape[{dim}] * _inner"]
    bo, bj = copy_tile([math.prod(_tile_sizes(program, t)[dim:]) for t in tensors])  # each input's run
    grid = f"(_cdiv(_outer, {bo}) * (_cdiv(_row, {bj}) + {parts}),)"
    lines.append(f"{name}[{grid}]({', '.join(locals_)}, {out}, {', '.join(widths)}, {', '.join(strides)}, "
                 f"_outer, _row, BO={bo}, BJ={bj})")
    return Emitted(["\n".join(kernel)], lines)
