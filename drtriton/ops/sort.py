"""Order statistics along one axis: sort (and what lowers to it: argsort, msort, quantile's
sort), topk, kthvalue, median, nanmedian and mode.

One Triton template serves them all (`drtriton.policy.emit.sort`): a program sorts one row along
the axis and stores all of it (sort), its first k (topk) or one element (kthvalue, median).
NaN sorts after every number, as in PyTorch. FLOPs: a sort counts as 8 per element (a bitonic
sort of a few thousand elements does about log2(n)^2 / 2 compare-and-swaps per element; a
stand-in, as the rules are linear). Not drawn by synthesis: their outputs are the inputs'
values reordered (no arithmetic).
"""

from __future__ import annotations

from drtriton.ops import ranges
from drtriton.ops.operator import Axis, Choice, Operator, Slot
from drtriton.ops.reduce import axes_of

_RANKS = (1, 2, 3, 4, 5)
_KEEPDIM = Choice("keepdim", (False, True))
_COST = 8


def _sort_rule(ctx, dims, attrs):
    (x,) = dims
    axes_of(attrs, len(x))
    return list(x), _COST * ctx.mul(*x)


def _topk_rule(ctx, dims, attrs):
    (x,) = dims
    (axis,) = axes_of(attrs, len(x))
    k = attrs["k"]
    ctx.require(x[axis] >= k, "topk: selected index k out of range")
    out = list(x)
    out[axis] = k
    return out, _COST * ctx.mul(*x)


def _select_rule(ctx, dims, attrs):
    """kthvalue / median / nanmedian: one element of each sorted row (`dim` None: of all)."""
    (x,) = dims
    if attrs.get("dim") is None:
        return [], _COST * ctx.mul(*x)
    (axis,) = axes_of(attrs, len(x))
    if "k" in attrs:
        ctx.require(x[axis] >= attrs["k"], "kthvalue: selected number k out of range")
    out = [1 if i == axis else d for i, d in enumerate(x)] if attrs.get("keepdim") else \
        [d for i, d in enumerate(x) if i != axis]
    return out, _COST * ctx.mul(*x)


def _median_template(name: str):
    def template(attrs) -> str:
        if attrs.get("dim") is None:
            return f"torch.{name}({{x}})"
        return f"torch.{name}({{x}}, dim={{dim}}, keepdim={{keepdim}})[0]"
    return template


def _op(name, rule, template, description, attrs, fns, methods):
    return Operator(name=name, category="sort", description=description, slots=(Slot("input", _RANKS),), rule=rule,
                    torch_template=template, attrs=attrs, value_range=ranges.same_as_input, torch_functions=fns,
                    tensor_methods=methods, drawn=False)


OPERATORS = (
    _op("sort", _sort_rule, "torch.sort({x}, dim={dim}, descending={descending}, stable={stable})[0]",
        "sorted along an axis (values; the indices are its second output: argsort)",
        (Axis("dim"), Choice("descending", (False, True)), Choice("stable", (False, True))),
        ("torch.sort", "torch.argsort", "torch.msort"), ("sort", "argsort", "msort")),
    _op("topk", _topk_rule, "torch.topk({x}, {k}, dim={dim}, largest={largest})[0]",
        "the k largest (or smallest) along an axis, sorted (values; indices second)",
        (Choice("k", (1, 2, 3)), Axis("dim"), Choice("largest", (True, False))), ("torch.topk",), ("topk",)),
    _op("kthvalue", _select_rule, "torch.kthvalue({x}, {k}, dim={dim}, keepdim={keepdim})[0]",
        "the k-th smallest along an axis (values; indices second)",
        (Choice("k", (1, 2, 3)), Axis("dim"), _KEEPDIM), ("torch.kthvalue",), ("kthvalue",)),
    _op("median", _select_rule, _median_template("median"),
        "the lower median along an axis or of all elements (NaN if any is NaN; indices second)",
        (Axis("dim"), _KEEPDIM), ("torch.median",), ("median",)),
    _op("nanmedian", _select_rule, _median_template("nanmedian"),
        "the lower median of the non-NaN values along an axis or of all elements (indices second)",
        (Axis("dim"), _KEEPDIM), ("torch.nanmedian",), ("nanmedian",)),
    _op("mode", _select_rule, "torch.mode({x}, dim={dim}, keepdim={keepdim})[0]",
        "the most frequent value along an axis, the smallest of those equally frequent (indices second)",
        (Axis("dim"), _KEEPDIM), ("torch.mode",), ("mode",)),
)
