"""Normalisation layers (module form): batch, instance, group, layer and RMS norm.

Modules stay in training mode in generated programs (as in KernelBench), so batch and instance
norm use batch statistics: PyTorch then needs more than one value per channel (batch norm) and
more than one spatial element (instance norm); the rules say so.
FLOPs: 5 per element (mean, variance, normalise, scale, shift).
"""

from __future__ import annotations

from drtriton.ops import ranges
from drtriton.ops.operator import Choice, ModuleCall, Operator, Param, Slot
from drtriton.ops.shape import ShapeError

_F = "torch.nn.functional."
_COST = 5


def _min_rank(x, rank, what):
    if len(x) < rank:
        raise ShapeError(f"{what} needs an input of rank >= {rank}, got {len(x)}")


def _batch_norm_rule(ctx, dims, attrs):
    (x,) = dims
    _min_rank(x, 2, "batch_norm")
    ctx.require(ctx.mul(x[0], *x[2:]) >= 2, "expected more than 1 value per channel when training")
    return list(x), _COST * ctx.mul(*x)


def _instance_norm_rule(ctx, dims, attrs):
    (x,) = dims
    _min_rank(x, 3, "instance_norm")
    ctx.require(ctx.mul(*x[2:]) >= 2, "expected more than 1 spatial element when training")
    return list(x), _COST * ctx.mul(*x)


def _group_norm_rule(ctx, dims, attrs):
    (x,) = dims
    _min_rank(x, 2, "group_norm")
    groups = ctx.param("num_groups", lo=1, gen=(1, 32))
    per_group = ctx.quotient(x[1], groups, "num_channels must be divisible by num_groups")
    ctx.require(ctx.mul(x[0], per_group, *x[2:]) >= 2, "expected more than 1 value per channel when training")
    ctx.guard(ctx.mul(per_group, *x[2:]) >= 2, "a group of one value normalises to zero")
    return list(x), _COST * ctx.mul(*x)


def _last_dims_rule(ctx, dims, attrs):
    (x,) = dims
    n = attrs["normalized_dims"]
    _min_rank(x, n, "normalising the last dims")
    ctx.guard(ctx.mul(*x[len(x) - n:]) >= 2, "normalising a single value gives a constant")
    return list(x), _COST * ctx.mul(*x)


def _by_rank(prefix, names):
    """Module class by input rank (BatchNorm1d for 2-D/3-D input, 2d for 4-D, ...)."""

    def module(attrs, shapes):
        x = shapes[0]
        return ModuleCall(f"nn.{prefix}{names[len(x)]}", (("num_features", x[1]),))

    return module


def _group_norm_module(attrs, shapes):
    return ModuleCall("nn.GroupNorm", (("num_groups", attrs["num_groups"]), ("num_channels", shapes[0][1])))


def _last_dims_module(cls):
    def module(attrs, shapes):
        x = shapes[0]
        return ModuleCall(cls, (("normalized_shape", tuple(x[len(x) - attrs["normalized_dims"]:])),))

    return module


def _all_but_channels(attrs, rank):
    return frozenset(a for a in range(rank) if a != 1)


def _spatial_axes(attrs, rank):
    return frozenset(range(2, rank))


def _channels_and_spatial(attrs, rank):
    return frozenset(range(1, rank))


def _last_axes(attrs, rank):
    return frozenset(range(rank - attrs["normalized_dims"], rank))


_LAST_DIMS = Choice("normalized_dims", (1, 1, 2, 3), valid=lambda n, ranks: n <= ranks[0])


def _norm(name, rule, ranks, module, normalizes, description, *, fns, modules, attrs=(), params=()):
    return Operator(
        name=name, category="norm", description=description, slots=(Slot("input", ranks),), rule=rule,
        torch_template="self.{module}({x})", module=module, attrs=attrs, params=params,
        value_range=ranges.unbounded, normalizes=normalizes, torch_functions=fns, module_types=modules,
    )


OPERATORS = (
    _norm("batch_norm", _batch_norm_rule, (2, 3, 4, 5), _by_rank("BatchNorm", {2: "1d", 3: "1d", 4: "2d", 5: "3d"}),
          _all_but_channels, "nn.BatchNorm1d/2d/3d (by rank), batch statistics",
          fns=(_F + "batch_norm", "torch.batch_norm"),
          modules=("torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d")),
    _norm("instance_norm", _instance_norm_rule, (3, 4, 5), _by_rank("InstanceNorm", {3: "1d", 4: "2d", 5: "3d"}),
          _spatial_axes, "nn.InstanceNorm1d/2d/3d (by rank), no affine",
          fns=(_F + "instance_norm", "torch.instance_norm"),
          modules=("torch.nn.InstanceNorm1d", "torch.nn.InstanceNorm2d", "torch.nn.InstanceNorm3d")),
    _norm("group_norm", _group_norm_rule, (2, 3, 4, 5), _group_norm_module, _channels_and_spatial,
          "nn.GroupNorm over channel groups", params=(Param("num_groups", "channel groups", test_range=(1, 4)),),
          fns=(_F + "group_norm", "torch.group_norm"), modules=("torch.nn.GroupNorm",)),
    _norm("layer_norm", _last_dims_rule, (1, 2, 3, 4, 5), _last_dims_module("nn.LayerNorm"), _last_axes,
          "nn.LayerNorm over the last 1-3 dims", attrs=(_LAST_DIMS,),
          fns=(_F + "layer_norm", "torch.layer_norm"), modules=("torch.nn.LayerNorm",)),
    _norm("rms_norm", _last_dims_rule, (1, 2, 3, 4, 5), _last_dims_module("nn.RMSNorm"), _last_axes,
          "nn.RMSNorm over the last 1-3 dims", attrs=(_LAST_DIMS,),
          fns=(_F + "rms_norm", "torch.rms_norm"), modules=("torch.nn.RMSNorm",)),
)
