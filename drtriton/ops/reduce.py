"""Operators along axes: reductions, scans (cumsum/cumprod) and softmax/log-softmax.

FLOPs per input element: 1 for reductions and scans, 2 for norms, 3 for var and std, 4 for logsumexp, 5 for
softmax. Products over long axes overflow or underflow float32, so ``prod``/``cumprod`` are
generated over axes of at most 16 elements (a guard: PyTorch itself accepts any length).
"""

from __future__ import annotations

import math

from drtriton.ops import ranges
from drtriton.ops.operator import Axis, Choice, Operator, Slot
from drtriton.ops.shape import ShapeError

_F = "torch.nn.functional."
_RANKS = (1, 2, 3, 4, 5)
_KEEPDIM = Choice("keepdim", (False, True))
#: longest axis a product runs over in generated programs
MAX_PRODUCT_LENGTH = 16


def axes_of(attrs, rank: int) -> tuple[int, ...]:
    """The ``dim`` attribute as a tuple of non-negative axes, checked like PyTorch does."""
    dim = attrs["dim"]
    axes = (dim,) if isinstance(dim, int) else tuple(dim)
    if rank < 1:
        raise ShapeError("expected an input of rank >= 1")
    for a in axes:
        if not -rank <= a < rank:
            raise ShapeError(f"dim {a} is out of range for rank {rank}")
    axes = tuple(a % rank for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError("dim appears multiple times")
    return axes


def _reduce_rule(cost: int, check=None):
    def rule(ctx, dims, attrs):
        (x,) = dims
        if attrs.get("p") == "fro":  # torch.norm(x, p='fro'): the whole tensor
            return [], cost * ctx.mul(*x)
        axes = axes_of(attrs, len(x))
        if check is not None:
            for a in axes:
                check(ctx, x[a])
        if attrs.get("keepdim", False):
            out = [1 if i in axes else d for i, d in enumerate(x)]
        else:
            out = [d for i, d in enumerate(x) if i not in axes]
        return out, cost * ctx.mul(*x)

    return rule


def _along_rule(cost: int, check=None):
    """Shape-preserving operators along one axis (scans, softmax)."""

    def rule(ctx, dims, attrs):
        (x,) = dims
        (axis,) = axes_of(attrs, len(x))
        if check is not None:
            check(ctx, x[axis])
        return list(x), cost * ctx.mul(*x)

    return rule


def _short(ctx, size):
    ctx.guard(size <= MAX_PRODUCT_LENGTH, "products over long axes overflow float32")


def _not_single(ctx, size):
    ctx.guard(size >= 2, "over a single element the result is constant")


def _reduced_axes(attrs, rank):
    if attrs.get("p") == "fro":
        return frozenset(range(rank))
    return frozenset(axes_of(attrs, rank))


def _one_axis(attrs, rank):
    return frozenset(axes_of(attrs, rank))


def _norm_template(attrs):
    if attrs.get("p") == "fro":
        return "torch.norm({x}, p={p})"
    return "torch.norm({x}, p={p}, dim={dim}, keepdim={keepdim})"


def _op(name, category, rule, template, description, *, attrs, value_range, fns, methods=(), modules=(),
        **extra):
    return Operator(name=name, category=category, description=description, slots=(Slot("input", _RANKS),),
                    rule=rule, torch_template=template, attrs=attrs, value_range=value_range,
                    torch_functions=fns, tensor_methods=methods, module_types=modules, **extra)


def _reduction(name, cost, template, description, value_range, *, multi=False, check=None, fns, methods,
               **extra):
    return _op(name, "reduction", _reduce_rule(cost, check), template, description,
               attrs=(Axis("dim", multi=multi), _KEEPDIM), value_range=value_range, fns=fns, methods=methods,
               **extra)


_VALUES_AT = "torch.{name}({{x}}, dim={{dim}}, keepdim={{keepdim}})"

REDUCTIONS = (
    _reduction("sum", 1, _VALUES_AT.format(name="sum"), "sum over 1-3 axes", ranges.accumulate, multi=True,
               reduces=_reduced_axes, fns=("torch.sum",), methods=("sum",)),
    _reduction("mean", 1, _VALUES_AT.format(name="mean"), "mean over 1-3 axes", ranges.same_as_input,
               multi=True, reduces=_reduced_axes, fns=("torch.mean",), methods=("mean",)),
    _reduction("max", 1, _VALUES_AT.format(name="max") + "[0]", "maximum along an axis (values)",
               ranges.same_as_input, fns=("torch.max", "torch.amax"), methods=("max", "amax")),
    _reduction("min", 1, _VALUES_AT.format(name="min") + "[0]", "minimum along an axis (values)",
               ranges.same_as_input, fns=("torch.min", "torch.amin"), methods=("min", "amin")),
    _reduction("prod", 1, _VALUES_AT.format(name="prod"), "product along a short axis", ranges.product,
               check=_short, fns=("torch.prod",), methods=("prod",)),
    _reduction("argmax", 1, _VALUES_AT.format(name="argmax"), "index of the maximum (int64)", ranges.nonneg,
               check=_not_single, out_dtype="int64", fns=("torch.argmax",), methods=("argmax",)),
    _reduction("argmin", 1, _VALUES_AT.format(name="argmin"), "index of the minimum (int64)", ranges.nonneg,
               check=_not_single, out_dtype="int64", fns=("torch.argmin",), methods=("argmin",)),
    # var and std: mean, then the sum of squared deviations over R - correction (Bessel's 1 by default).
    # Their rule is the reductions' (CP-SAT too), but synthesis does not draw them yet: drawn, a
    # variance (small, non-negative) fed into a hinge such as triplet_margin_loss gave a program
    # whose output is zero on draws other than the generator's gate saw (tests/test_synth_programs.py)
    _op("var", "reduction", _reduce_rule(3, _not_single),
        "torch.var({x}, dim={dim}, correction={correction}, keepdim={keepdim})",
        "variance over 1-3 axes (correction: 1 unbiased, 0 population)",
        attrs=(Axis("dim", multi=True), Choice("correction", (0.0, 1.0)), _KEEPDIM), value_range=ranges.nonneg,
        fns=("torch.var",), methods=("var",), drawn=False),
    _op("std", "reduction", _reduce_rule(3, _not_single),
        "torch.std({x}, dim={dim}, correction={correction}, keepdim={keepdim})",
        "standard deviation over 1-3 axes (correction: 1 unbiased, 0 population)",
        attrs=(Axis("dim", multi=True), Choice("correction", (0.0, 1.0)), _KEEPDIM), value_range=ranges.nonneg,
        fns=("torch.std",), methods=("std",), drawn=False),
    _reduction("logsumexp", 4, _VALUES_AT.format(name="logsumexp"), "log(sum(exp(x))) over 1-3 axes",
               ranges.unbounded, multi=True, reduces=_reduced_axes, fns=("torch.logsumexp",),
               methods=("logsumexp",)),
    _op("norm", "reduction", _reduce_rule(2), _norm_template, "p-norm along axes (p=1, 2) or Frobenius",
        attrs=(Choice("p", (1, 2, "fro")), Axis("dim", multi=True), _KEEPDIM), value_range=ranges.nonneg,
        reduces=_reduced_axes, fns=("torch.norm", "torch.linalg.vector_norm", "torch.linalg.norm"),
        methods=("norm",)),
)

SCANS = (
    _op("cumsum", "scan", _along_rule(1), "torch.cumsum({x}, dim={dim})", "running sum along an axis",
        attrs=(Axis("dim"),), value_range=ranges.accumulate, fns=("torch.cumsum",), methods=("cumsum",)),
    _op("cumprod", "scan", _along_rule(1, _short), "torch.cumprod({x}, dim={dim})",
        "running product along a short axis", attrs=(Axis("dim"),), value_range=ranges.product,
        fns=("torch.cumprod",), methods=("cumprod",)),
    # log(cumsum(exp(x))) without overflow: a scan whose combine is a stable log-add-exp
    _op("logcumsumexp", "scan", _along_rule(4), "torch.logcumsumexp({x}, dim={dim})",
        "running log-sum-exp along an axis", attrs=(Axis("dim"),), value_range=ranges.unbounded,
        fns=("torch.logcumsumexp",), methods=("logcumsumexp",), drawn=False),
    # the running maximum (minimum) and, second output, where it was (the latest of equal ones)
    _op("cummax", "scan", _along_rule(1), "torch.cummax({x}, dim={dim})[0]",
        "running maximum along an axis (values; indices second)", attrs=(Axis("dim"),),
        value_range=ranges.same_as_input, fns=("torch.cummax",), methods=("cummax",), drawn=False),
    _op("cummin", "scan", _along_rule(1), "torch.cummin({x}, dim={dim})[0]",
        "running minimum along an axis (values; indices second)", attrs=(Axis("dim"),),
        value_range=ranges.same_as_input, fns=("torch.cummin",), methods=("cummin",), drawn=False),
)

SOFTMAX = (
    _op("softmax", "softmax", _along_rule(5, _not_single), "torch.softmax({x}, dim={dim})",
        "exp(x) / sum(exp(x)) along an axis", attrs=(Axis("dim"),), value_range=ranges.unit,
        normalizes=_one_axis, fns=("torch.softmax", _F + "softmax"), methods=("softmax",),
        modules=("torch.nn.Softmax",)),
    _op("log_softmax", "softmax", _along_rule(5, _not_single), "torch.log_softmax({x}, dim={dim})",
        "x - logsumexp(x) along an axis", attrs=(Axis("dim"),), value_range=lambda rs, a: (-math.inf, 0.0),
        normalizes=_one_axis, fns=("torch.log_softmax", _F + "log_softmax"), methods=("log_softmax",),
        modules=("torch.nn.LogSoftmax",)),
)

OPERATORS = REDUCTIONS + SCANS + SOFTMAX
