"""Losses (functional form) with ``reduction`` in {mean, sum, none}.

Pointwise losses broadcast their operands as PyTorch does (it warns when shapes differ), but
generated programs give both operands the same shape (a guard). FLOPs: 3 per element for
pointwise losses, 5 per logit for cross-entropy, 3 per element and distance for the triplet
margin loss.
"""

from __future__ import annotations

from drtriton.ops import ranges
from drtriton.ops.operator import Choice, Operator, Slot
from drtriton.ops.shape import ShapeError, broadcast_shapes

_F = "torch.nn.functional."
_ANY = (0, 1, 2, 3, 4)
_REDUCTION = Choice("reduction", ("mean", "sum", "none"))


def _reduced(attrs, shape):
    return list(shape) if attrs.get("reduction", "mean") == "none" else []


def _pointwise_rule(ctx, dims, attrs):
    shape = broadcast_shapes(ctx, *dims)
    # PyTorch broadcasts with a "likely incorrect" warning: generated programs use equal shapes
    a, b = dims
    ctx.guard(len(a) == len(b), "loss operands of different ranks")
    for x, y in zip(a, b):
        ctx.guard(x == y, "loss operands of different shapes")
    return _reduced(attrs, shape), 3 * ctx.mul(*shape)


def _kl_div_rule(ctx, dims, attrs):
    if attrs.get("reduction") == "batchmean" and len(dims[0]) < 1:
        raise ShapeError("batchmean needs an input with a batch dimension")
    return _pointwise_rule(ctx, dims, attrs)


def _same_shape_fresh(rng, slot, anchor_slot, anchor_rank):
    return list(range(anchor_rank))


def _cross_entropy_rule(ctx, dims, attrs):
    x, target = dims
    if len(x) < 2:
        raise ShapeError("cross_entropy here takes (N, C, *) logits")
    if len(target) != len(x) - 1:
        raise ShapeError("class-index targets have one dimension fewer than the logits")
    expected = [x[0], *x[2:]]
    for got, want in zip(target, expected):
        ctx.require(got == want, "target shape must be the logits' shape without the class axis")
    ctx.guard(x[1] >= 2, "one class gives a constant loss")
    return _reduced(attrs, target), 5 * ctx.mul(*x)


def _cross_entropy_ranks(slot, known):
    if slot == 0:
        return (2, 3, 4) if 1 not in known else (known[1] + 1,)
    return (known[0] - 1,) if 0 in known else (1, 2, 3)


def _cross_entropy_fresh(rng, slot, anchor_slot, anchor_rank):
    return [0, *range(2, anchor_rank)]  # (N, d1, ...) of the logits


def _triplet_rule(ctx, dims, attrs):
    if len({len(d) for d in dims}) != 1 or len(dims[0]) < 1:
        raise ShapeError("anchor, positive and negative must have the same number of dimensions")
    anchor, positive, negative = dims
    # two distances over the last axis, each broadcasting its pair; then the two broadcast
    near = broadcast_shapes(ctx, anchor, positive)
    far = broadcast_shapes(ctx, anchor, negative)
    shape = broadcast_shapes(ctx, near[:-1], far[:-1])
    return _reduced(attrs, shape), 3 * ctx.mul(*near) + 3 * ctx.mul(*far)


def _pointwise(name, template, description, *, extra_attrs=(), target_domain="real", reductions=_REDUCTION,
               rule=_pointwise_rule, ranks=_ANY, value_range=ranges.nonneg, fns, modules):
    return Operator(
        name=name, category="loss", description=description, rule=rule,
        slots=(Slot("input", ranks), Slot("target", ranks, domain=target_domain)),
        torch_template=template, attrs=(reductions, *extra_attrs), fresh=_same_shape_fresh,
        value_range=value_range, torch_functions=fns, module_types=modules,
    )


OPERATORS = (
    _pointwise("mse_loss", "F.mse_loss({x}, {y}, reduction={reduction})", "mean squared error",
               fns=(_F + "mse_loss",), modules=("torch.nn.MSELoss",)),
    _pointwise("smooth_l1_loss", "F.smooth_l1_loss({x}, {y}, reduction={reduction}, beta={beta})",
               "Huber-style loss, quadratic below beta", extra_attrs=(Choice("beta", (0.5, 1.0, 2.0)),),
               fns=(_F + "smooth_l1_loss", _F + "huber_loss"),
               modules=("torch.nn.SmoothL1Loss", "torch.nn.HuberLoss")),
    _pointwise("kl_div", "F.kl_div({x}, {y}, reduction={reduction})",
               "KL divergence; input is log-probabilities, target probabilities",
               reductions=Choice("reduction", ("batchmean", "sum", "none")), target_domain="unit",
               rule=_kl_div_rule, ranks=(1, 2, 3, 4), value_range=ranges.unbounded,
               fns=(_F + "kl_div",), modules=("torch.nn.KLDivLoss",)),
    Operator(
        name="cross_entropy", category="loss", description="softmax cross-entropy with class-index targets",
        slots=(Slot("input", (2, 3, 4)), Slot("target", (1, 2, 3), domain="index", index_of=(0, 1))),
        rule=_cross_entropy_rule, rank_rule=_cross_entropy_ranks, fresh=_cross_entropy_fresh,
        torch_template="F.cross_entropy({x}, {y}, reduction={reduction})", attrs=(_REDUCTION,),
        value_range=ranges.nonneg, torch_functions=(_F + "cross_entropy",),
        module_types=("torch.nn.CrossEntropyLoss",),
    ),
    Operator(
        name="triplet_margin_loss", category="loss", description="max(d(a, p) - d(a, n) + margin, 0), L2",
        slots=(Slot("anchor", (1, 2, 3)), Slot("positive", (1, 2, 3)), Slot("negative", (1, 2, 3))),
        same_rank=True, rule=_triplet_rule, fresh=_same_shape_fresh,
        torch_template="F.triplet_margin_loss({x}, {y}, {z}, margin={margin}, reduction={reduction})",
        attrs=(Choice("margin", (0.5, 1.0, 2.0)), _REDUCTION), value_range=ranges.nonneg,
        torch_functions=(_F + "triplet_margin_loss",), module_types=("torch.nn.TripletMarginLoss",),
    ),
)
