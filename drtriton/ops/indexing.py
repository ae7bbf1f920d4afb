"""Indexing and data movement: each output element is one element of an input, found from its
position (cat, stack, flip, constant_pad) or through an index tensor (index_select, gather, embedding).

What real models are made of around their matrix products: token embeddings, the halves of a
rotary embedding put back together, an upsampling's source pixels, a padded border, an LSTM's gates stacked over time, top-k routing. One
Triton template serves them all (`drtriton.policy.emit.gather`). Capture maps `cat` and
`stack` of any number of tensors, and `index` with index tensors on any axes; the records
describe the two-input forms synthesis would use. Not drawn by synthesis: their outputs repeat their inputs' values (no arithmetic).
"""

from __future__ import annotations

from drtriton.ops.operator import Choice, Operator, Slot
from drtriton.ops.shape import ShapeError

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


def _op(name, slots, rule, torch_template, description, attrs, fns, methods=()):
    return Operator(name=name, category="indexing", slots=slots, rule=rule, torch_template=torch_template,
                    description=description, attrs=attrs, torch_functions=fns, tensor_methods=methods,
                    value_range=lambda ranges, attrs: (min(r[0] for r in ranges if r), max(r[1] for r in ranges if r)),
                    drawn=False)


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
)
