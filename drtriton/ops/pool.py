"""Pooling: max and average pooling in 1-3 spatial dimensions, adaptive average pooling.

Functional form (``F.max_pool2d(x, kernel_size=..., ...)``), batched or unbatched inputs.
FLOPs: prod(kernel) per output element; adaptive pooling reads each input element once.
"""

from __future__ import annotations

import math

from drtriton.ops import ranges
from drtriton.ops.operator import Operator, Param, Slot, Spatial
from drtriton.ops.shape import ShapeError

_F = "torch.nn.functional."


def _spatial(x, n):
    if len(x) not in (n + 1, n + 2):
        raise ShapeError(f"expected a {n + 1}-D or {n + 2}-D input, got {len(x)}-D")
    return x[: len(x) - n], x[-n:]


def _pool_rule(n: int, dilated: bool):
    def rule(ctx, dims, attrs):
        lead, spatial = _spatial(dims[0], n)
        kernel, stride = attrs["kernel_size"], attrs["stride"]
        dilation = attrs["dilation"] if dilated else (1,) * n
        out_spatial = []
        for i in range(n):
            span = dilation[i] * (kernel[i] - 1) + 1
            # PyTorch: "pad should be at most half of kernel size"
            pad = ctx.param("padding", lo=0, hi=kernel[i] // 2, index=i, dist="uniform")
            ctx.require(spatial[i] + 2 * pad >= span, "output size is too small")
            ctx.guard(spatial[i] >= span, "some windows would read only padding (-inf for max pooling)")
            if n == 3 and not dilated:  # avg_pool3d also checks the unpadded input
                ctx.require(spatial[i] >= kernel[i], "input image smaller than kernel size")
            out_spatial.append(ctx.floordiv(spatial[i] + 2 * pad - span, stride[i]) + 1)
        out = [*lead, *out_spatial]
        return out, math.prod(kernel) * ctx.mul(*out)

    return rule


def _adaptive_rule(n: int):
    def rule(ctx, dims, attrs):
        lead, spatial = _spatial(dims[0], n)
        sizes = []
        for i in range(n):
            size = ctx.param("output_size", lo=1, index=i, gen=(1, 16))
            ctx.guard(size <= spatial[i], "adaptive pooling should not upsample")
            sizes.append(size)
        return [*lead, *sizes], ctx.mul(*dims[0])

    return rule


_PADDING = Param("padding", "implicit padding per side (at most half the kernel)", per_spatial=True,
                 test_range=(0, 3))


def _pool(kind: str, n: int) -> Operator:
    dilated = kind == "max"
    attrs = [Spatial("kernel_size", (2, 2, 3, 4), n), Spatial("stride", (1, 2, 2, 3), n, asym=0.1)]
    if dilated:
        attrs.append(Spatial("dilation", (1, 1, 1, 2), n, asym=0.1))
    template = f"F.{kind}_pool{n}d({{x}}, kernel_size={{kernel_size}}, stride={{stride}}, padding={{padding}}"
    template += ", dilation={dilation})" if dilated else ")"
    return Operator(
        name=f"{kind}_pool{n}d", category="pool",
        description=f"{'max' if dilated else 'average (zero padding counted)'} pooling over {n} spatial dims",
        slots=(Slot("input", (n + 1, n + 2)),), rule=_pool_rule(n, dilated), torch_template=template,
        attrs=tuple(attrs), params=(_PADDING,),
        value_range=ranges.same_as_input if dilated else ranges.hull_with_zero,
        torch_functions=(f"{_F}{kind}_pool{n}d", f"torch.{kind}_pool{n}d" if n == 1 or dilated
                         else f"torch._C._nn.{kind}_pool{n}d"),
        module_types=(f"torch.nn.{'Max' if dilated else 'Avg'}Pool{n}d",),
    )


def _adaptive(n: int) -> Operator:
    return Operator(
        name=f"adaptive_avg_pool{n}d", category="pool",
        description=f"average pooling to a fixed {n}-D output size (global pooling at size 1)",
        slots=(Slot("input", (n + 1, n + 2)),), rule=_adaptive_rule(n),
        torch_template=f"F.adaptive_avg_pool{n}d({{x}}, {{output_size}})",
        params=(Param("output_size", "output size per spatial dim", per_spatial=True, test_range=(1, 6)),),
        value_range=ranges.same_as_input,
        torch_functions=(f"{_F}adaptive_avg_pool{n}d", f"torch._C._nn.adaptive_avg_pool{n}d"),
        module_types=(f"torch.nn.AdaptiveAvgPool{n}d",),
    )


OPERATORS = tuple(_pool(kind, n) for kind in ("max", "avg") for n in (1, 2, 3)) + (_adaptive(2), _adaptive(3))
