"""Indexing and data movement: each output element is one element of an input, found from its
position (cat, stack, flip, constant_pad) or through an index tensor (index_select, gather, embedding),
or a bucket found by a binary search (bucketize);
a reduction over runs of rows whose bounds are data (segment_reduce, and EmbeddingBag as one: the
rows it reduces read from its table through the indices);
and the store side, where an index tensor says where each element of a source goes (scatter,
scatter_add, scatter_reduce, index_put, and what lowers to them: index_add, index_copy,
index_fill, index_reduce, put, max_unpool).

What real models are made of around their matrix products: token embeddings, the halves of a
rotary embedding put back together, an upsampling's source pixels, a padded border, an LSTM's gates stacked over time, top-k routing. One
Triton template serves them all (`drtriton.policy.emit.gather`); the store side has its own
(`drtriton.policy.emit.scatter`: the output starts as a copy of the input, then each source
element is stored, or added / maxed / mined atomically, where its index says). Capture maps `cat` and
`stack` of any number of tensors, and `index` with index tensors on any axes; the records
describe the two-input forms synthesis would use. Not drawn by synthesis: their outputs repeat their inputs' values (no arithmetic).
"""

from __future__ import annotations

from dataclasses import dataclass

from drtriton.ops.operator import Choice, Operator, Slot
from drtriton.ops.ranges import UNBOUNDED
from drtriton.ops.shape import ShapeError, broadcast_shapes

_RANKS = (1, 2, 3, 4)


def _axis(dim: int, rank: int) -> int:
    if not -rank <= dim < rank:
        raise ShapeError(f"dim {dim} out of range for rank {rank}")
    return dim % rank


def _cat_rule(ctx, dims, attrs):
    a, b = dims
    ctx.require(len(a) == len(b), "cat: tensors of different ranks")
    d = _axis(attrs["dim"], len(a))
    for i, (x, y) in enumerate(zip(a, b)):
        if i != d:
            ctx.require(x == y, f"cat: sizes differ along dim {i}")
    out = list(a)
    out[d] = a[d] + b[d]
    return out, ctx.mul(*out)


def _stack_rule(ctx, dims, attrs):
    a, b = dims
    ctx.require(len(a) == len(b), "stack: tensors of different ranks")
    for x, y in zip(a, b):
        ctx.require(x == y, "stack: tensors of different shapes")
    d = _axis(attrs["dim"], len(a) + 1)
    out = list(a[:d]) + [2] + list(a[d:])
    return out, ctx.mul(*out)


def _flip_rule(ctx, dims, attrs):
    (a,) = dims
    axes = [_axis(d, len(a)) for d in attrs["dims"]]
    ctx.require(len(set(axes)) == len(axes), "flip: an axis twice")
    return list(a), ctx.mul(*a)


def _index_select_rule(ctx, dims, attrs):
    x, index = dims
    d = _axis(attrs["dim"], len(x))
    out = list(x)
    out[d] = index[0]
    return out, ctx.mul(*out)


def _gather_rule(ctx, dims, attrs):
    x, index = dims
    ctx.require(len(x) == len(index), "gather: index and input of different ranks")
    d = _axis(attrs["dim"], len(x))
    for i, (a, b) in enumerate(zip(x, index)):
        if i != d:
            ctx.require(b <= a, f"gather: index larger than the input along dim {i}")
    return list(index), ctx.mul(*index)


def _embedding_rule(ctx, dims, attrs):
    indices, weight = dims
    out = list(indices) + [weight[1]]
    return out, ctx.mul(*out)


def _pad_rule(ctx, dims, attrs):
    """F.pad's constant mode: (before, after) pairs from the last axis backwards; negative crops."""
    (x,) = dims
    pad = attrs["pad"]
    ctx.require(len(pad) % 2 == 0 and len(pad) // 2 <= len(x), "pad: pairs for at most every axis")
    out = list(x)
    for k in range(len(pad) // 2):
        d = len(x) - 1 - k
        out[d] = x[d] + pad[2 * k] + pad[2 * k + 1]
        ctx.require(out[d] >= 1, "pad: an axis padded to nothing")
    return out, ctx.mul(*out)


def _index_rule(ctx, dims, attrs):
    """x[index] (advanced indexing on the first axis): the index's shape, then x's other axes."""
    x, index = dims
    return list(index) + list(x[1:]), ctx.mul(*index, *x[1:])


def _scatter_rule(ctx, dims, attrs):
    """scatter(x, dim, index, src) and its reductions: index, x and src of one rank; the index no
    larger than src anywhere, nor than x off `dim` (PyTorch's check); the result is x's shape."""
    x, index, src = dims
    ctx.require(len(index) == len(x) == len(src), "scatter: index, input and src of different ranks")
    d = _axis(attrs["dim"], len(x))
    for i, (a, b, c) in enumerate(zip(x, index, src)):
        ctx.require(b <= c, f"scatter: index larger than src along dim {i}")
        if i != d:
            ctx.require(b <= a, f"scatter: index larger than the input along dim {i}")
    return list(x), ctx.mul(*index)


def _index_put_rule(ctx, dims, attrs):
    """x[index] = values (index on the first axis; accumulate adds): values broadcast to the
    indexed shape (index's, then x's other axes) without growing it; the result is x's shape."""
    x, index, values = dims
    target = list(index) + list(x[1:])
    ctx.require(len(values) <= len(target), "index_put: values of a higher rank than the indexed shape")
    grown = broadcast_shapes(ctx, target, values)
    for t, g in zip(target, grown):
        ctx.require(g == t, "index_put: values do not broadcast to the indexed shape")
    return list(x), ctx.mul(*target)


def _scatter_template(attrs) -> str:
    if attrs.get("reduce", "none") == "none":
        return "torch.scatter({x}, {dim}, {y}, {z})"
    return "torch.scatter_reduce({x}, {dim}, {y}, {z}, {reduce}, include_self={include_self})"


def _stored_range(ranges, attrs):
    """What a store-side operator's output can hold: the input's and the source's values (the index
    slot is skipped); unbounded when elements are summed or multiplied."""
    if attrs.get("accumulate") or attrs.get("reduce") in ("sum", "prod"):
        return UNBOUNDED
    x, _, src = ranges
    return (min(x[0], src[0]), max(x[1], src[1]))


def _bucketize_rule(ctx, dims, attrs):
    a, b = dims
    ctx.require(len(b) == 1, "bucketize: boundaries must be 1 dimension")
    return list(a), ctx.mul(*a)


def _segment_rule(ctx, dims, attrs):
    """segment_reduce(x, reduce, offsets=o) along axis 0: o holds S + 1 bounds, from 0 to x's rows;
    the result is S rows of x's other axes."""
    x, offsets = dims
    ctx.require(len(offsets) == 1, "segment_reduce: offsets must be 1 dimension")
    ctx.require(offsets[0] >= 2, "segment_reduce: offsets hold at least one segment's bounds")
    out = [offsets[0] - 1] + list(x[1:])
    return out, ctx.mul(*x)


def _segment_range(ranges, attrs):
    """Sums and products are unbounded (so is a mean with a nonzero initial value, which is added
    to the sum); extrema and means stay between the input's bounds and the initial value (an
    empty segment's)."""
    init = attrs.get("initial")
    if attrs["reduce"] in ("sum", "prod") or (attrs["reduce"] == "mean" and init):
        return UNBOUNDED  # ((initial + sum) / count leaves the inputs' range)
    lo, hi = ranges[0]
    return (lo, hi) if init is None else (min(lo, init), max(hi, init))


@dataclass(frozen=True)
class Segments:
    """The tensors of a captured segment reduction, as value names: `data` holds the rows (its
    table, for EmbeddingBag); `offsets` each segment's first element (`offsets_end` in attrs: with
    the last one's end after them, else the end is the element count) or `lengths` each
    segment's length; `indices`: the row of `data` each element reads (EmbeddingBag), else the
    element's own; `weights`: a factor per element."""

    data: str
    offsets: str | None = None
    lengths: str | None = None
    indices: str | None = None
    weights: str | None = None

    @property
    def bounds(self) -> str:
        return self.offsets or self.lengths


def segments_of(node) -> Segments:
    """The operands of a `segment_reduce` node: aten.segment_reduce's (data, reduce, lengths= or
    offsets=), or aten._embedding_bag's (weight, indices, offsets, ..., per_sample_weights)."""
    def name(a):
        return a["value"] if isinstance(a, dict) and "value" in a else None

    if node.target.startswith("aten._embedding_bag"):
        args = list(node.args) + [None] * 9
        return Segments(data=name(args[0]), offsets=name(args[2]), indices=name(args[1]),
                        weights=name(node.kwargs.get("per_sample_weights", args[6])))
    return Segments(data=name(node.args[0]), offsets=name(node.kwargs.get("offsets")),
                    lengths=name(node.kwargs.get("lengths")))


def offsets_source(count, shape, end: bool = True, lengths: bool = False) -> str:
    """A PyTorch expression drawing valid segment bounds over `count` elements (a number or an
    expression), `shape` the bounds' shape: sorted offsets from 0 (to `count` as the last with
    `end`), or, with `lengths`, lengths that sum to `count`. Random integers would not do: a
    segment past the data reads past it (PyTorch does not check)."""
    *lead, k = shape
    k = k + 1 if lengths else k
    inner = k - 2 if end or lengths else k - 1
    parts = [f"torch.zeros({', '.join(map(str, [*lead, 1]))}, dtype=torch.int64)",
             f"torch.randint(0, {count} + 1, ({', '.join(map(str, [*lead, max(inner, 0)]))},)).sort(-1).values"]
    if (end or lengths) and k >= 2:
        parts.append(f"torch.full(({', '.join(map(str, [*lead, 1]))},), {count})")
    offsets = f"torch.cat([{', '.join(parts)}], -1)"
    return f"torch.diff({offsets})" if lengths else offsets


def ends_source(count, shape) -> str:
    """A PyTorch expression drawing valid group ends over `count` rows (a number or an
    expression), `shape` the ends' shape: sorted, each from 0 to `count` (empty groups and rows
    past the last end included: grouped_mm's `offs`)."""
    return f"torch.randint(0, {count} + 1, {tuple(shape)}).sort(-1).values"


def _op(name, slots, rule, torch_template, description, attrs, fns, methods=(), value_range=None, same_rank=False,
        out_dtype="float32"):
    return Operator(name=name, category="indexing", slots=slots, rule=rule, torch_template=torch_template,
                    description=description, attrs=attrs, torch_functions=fns, tensor_methods=methods,
                    value_range=value_range or (
                        lambda ranges, attrs: (min(r[0] for r in ranges if r), max(r[1] for r in ranges if r))),
                    same_rank=same_rank, drawn=False, out_dtype=out_dtype)


OPERATORS = (
    _op("cat", (Slot("input", _RANKS), Slot("other", _RANKS)), _cat_rule, "torch.cat([{x}, {y}], dim={dim})",
        "tensors joined along an axis (any number of them in captured code)",
        (Choice("dim", (0, -1), valid=lambda v, ranks: ranks[0] >= 1),), ("torch.cat", "torch.concat")),
    _op("stack", (Slot("input", _RANKS), Slot("other", _RANKS)), _stack_rule, "torch.stack([{x}, {y}], dim={dim})",
        "tensors of one shape stacked along a new axis", (Choice("dim", (0, -1)),), ("torch.stack",)),
    _op("flip", (Slot("input", _RANKS),), _flip_rule, "torch.flip({x}, dims={dims})", "reversed along axes",
        (Choice("dims", ((-1,), (0,), (0, -1)), valid=lambda v, ranks: len(set(d % ranks[0] for d in v)) == len(v)),),
        ("torch.flip",), ("flip",)),
    # the index slot reads axis 0 of the input: synthesis-style draws keep dim 0 (captured code, any dim)
    _op("index_select", (Slot("input", _RANKS), Slot("index", (1,), domain="index", index_of=(0, 0))),
        _index_select_rule, "torch.index_select({x}, {dim}, {y})", "rows (along dim) picked by an index vector",
        (Choice("dim", (0,)),), ("torch.index_select",), ("index_select",)),
    _op("gather", (Slot("input", _RANKS), Slot("index", _RANKS, domain="index", index_of=(0, 0))),
        _gather_rule, "torch.gather({x}, {dim}, {y})", "out[i][j] = x[index[i][j]][j] (along dim)",
        (Choice("dim", (0,)),), ("torch.gather",), ("gather",)),
    _op("constant_pad", (Slot("input", _RANKS),), _pad_rule, "F.pad({x}, {pad}, value={value})",
        "padded with a constant (cropped where a pad is negative)",
        (Choice(("pad", "value"), (((1, 1), 0.0), ((0, 2, 1, 0), 0.5), ((2, 1, 1, 2, 0, 1), -1.0)),
                valid=lambda v, ranks: len(v[0]) // 2 <= ranks[0]),), ("torch.nn.functional.pad",)),
    # captured: x[i, :, j] with any index tensors and full slices between (aten.index.Tensor)
    _op("index", (Slot("input", _RANKS), Slot("index", (1, 2), domain="index", index_of=(0, 0))), _index_rule,
        "{x}[{y}]", "advanced indexing: elements at positions given by index tensors", (), (),
        ("__getitem__",)),
    _op("embedding", (Slot("input", (1, 2, 3), domain="index", index_of=(1, 0)), Slot("weight", (2,))),
        _embedding_rule, "F.embedding({x}, {y})", "rows of a table picked by token ids", (),
        ("torch.nn.functional.embedding",)),
    # a binary search per element: the index of its bucket among sorted boundaries (int64 indices
    # here, as out_dtype says; captured code may ask for int32)
    _op("bucketize", (Slot("input", _RANKS), Slot("boundaries", (1,))), _bucketize_rule,
        "torch.bucketize({x}, {y}, out_int32={out_int32}, right={right})",
        "the bucket of each element among sorted boundaries: the first boundary >= it (> it with right)",
        (Choice("out_int32", (False,)), Choice("right", (False, True))), ("torch.bucketize",),
        value_range=lambda ranges, attrs: (0.0, float("inf")), out_dtype="int64"),
    # rows reduced per segment, the segments' bounds data (drtriton.policy.emit.segment); captured
    # also from nn.EmbeddingBag, whose segments are bags of rows read from its table, and with
    # lengths, any axis, an initial value
    _op("segment_reduce", (Slot("input", (1, 2, 3)), Slot("offsets", (1,), domain="offsets", index_of=(0, 0))),
        _segment_rule, "torch.segment_reduce({x}, {reduce}, offsets={y}, initial={initial})",
        "rows reduced per segment, the segments given by their bounds (offsets) or lengths",
        (Choice(("reduce", "initial"), (("sum", 0.0), ("mean", 0.0), ("max", 0.0), ("min", 0.0), ("prod", 1.0))),),
        ("torch.segment_reduce", "torch.nn.functional.embedding_bag"), value_range=_segment_range),
    # the store side (drtriton.policy.emit.scatter): captured with any dim and any index tensors
    _op("scatter", (Slot("input", _RANKS), Slot("index", _RANKS, domain="index", index_of=(0, 0)), Slot("src", _RANKS)),
        _scatter_rule, _scatter_template,
        "out = x, then out[index[i][j]][j] = src[i][j] (along dim), or reduced into it (sum, mean, amax, amin, prod)",
        (Choice("dim", (0,)), Choice(("reduce", "include_self"), (("none", True), ("sum", True), ("sum", False),
                                                                  ("mean", True), ("mean", False), ("amax", True),
                                                                  ("amin", False), ("prod", True)))),
        ("torch.scatter", "torch.scatter_add", "torch.scatter_reduce"), ("scatter", "scatter_add", "scatter_reduce"),
        value_range=_stored_range, same_rank=True),
    _op("index_put",
        (Slot("input", _RANKS), Slot("index", (1,), domain="index", index_of=(0, 0)), Slot("values", _RANKS)),
        _index_put_rule, "torch.index_put({x}, ({y},), {z}, accumulate={accumulate})",
        "out = x, then out[index] = values (broadcast), or added into it (accumulate)",
        (Choice("accumulate", (False, True)),), ("torch.index_put",), ("index_put",), value_range=_stored_range),
)
