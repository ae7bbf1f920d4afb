"""Convolutions and transposed convolutions in 1, 2 and 3 spatial dimensions (module form).

Inputs are batched (N, C, *spatial) or unbatched (C, *spatial), as PyTorch accepts.
FLOPs: 2 per multiply-accumulate (bias not counted): 2 * prod(kernel) * (C_in / groups) per
output element for a convolution, 2 * prod(kernel) * (C_out / groups) per input element for a
transposed one.

Attributes sampled before solving: kernel_size, stride, dilation, bias and a ``groups_mode``
(one / grouped / depthwise); the solver then picks out_channels, groups and the paddings.
"""

from __future__ import annotations

import math

from drtriton.ops.operator import Choice, ModuleCall, Operator, Param, Slot, Spatial
from drtriton.ops.shape import ShapeError

_GROUPS_GEN = {"one": (1, 1), "grouped": (2, 16), "depthwise": (1, None)}


def _conv_rule(n: int, transposed: bool):
    def rule(ctx, dims, attrs):
        (x,) = dims
        if len(x) not in (n + 1, n + 2):
            raise ShapeError(f"expected a {n + 1}-D or {n + 2}-D input, got {len(x)}-D")
        batch, channels, spatial = x[: len(x) - n - 1], x[-n - 1], x[-n:]
        kernel, stride, dilation = attrs["kernel_size"], attrs["stride"], attrs["dilation"]
        mode = attrs.get("groups_mode")
        groups = ctx.param("groups", lo=1, gen=_GROUPS_GEN.get(mode), dist="log")
        if mode == "depthwise":
            ctx.guard(groups == channels, "depthwise: groups == in_channels")
        out_channels = ctx.param("out_channels", lo=1, gen=(1, None))
        in_per_group = ctx.quotient(channels, groups, "in_channels must be divisible by groups")
        out_per_group = ctx.quotient(out_channels, groups, "out_channels must be divisible by groups")
        out_spatial = []
        for i in range(n):
            span = dilation[i] * (kernel[i] - 1) + 1  # effective kernel extent
            if not transposed:
                pad = ctx.param("padding", lo=0, index=i, gen=(0, span // 2), dist="uniform")
                ctx.require(spatial[i] + 2 * pad >= span, "padded input is smaller than the kernel")
                ctx.guard(spatial[i] >= span, "some windows would read only padding")
                size = ctx.floordiv(spatial[i] + 2 * pad - span, stride[i]) + 1
            else:
                pad = ctx.param("padding", lo=0, index=i, gen=(0, (span - 1) // 2), dist="uniform")
                extra = ctx.param("output_padding", lo=0, hi=max(stride[i], dilation[i]) - 1,
                                  index=i, gen=(0, stride[i] - 1), dist="uniform")
                size = (spatial[i] - 1) * stride[i] - 2 * pad + span + extra
                # PyTorch rejects sizes < 0 and, depending on the kernel it picks, sometimes 0
                ctx.require(size >= 1, "output size is too small")
            out_spatial.append(size)
        out = [*batch, out_channels, *out_spatial]
        taps = 2 * math.prod(kernel)
        if transposed:
            return out, taps * ctx.mul(ctx.mul(*x), out_per_group)
        return out, taps * ctx.mul(ctx.mul(*out), in_per_group)

    return rule


def _per_axis(value, n: int) -> tuple:
    """A per-spatial-axis attribute as an n-tuple (an int stands for every axis)."""
    return (value,) * n if isinstance(value, int) else tuple(value)


def _conv_module(cls: str, transposed: bool):
    def module(attrs, shapes):
        x = shapes[0]
        n = len(attrs["kernel_size"])
        names = ["kernel_size", "stride", "padding"] + (["output_padding"] if transposed else []) + ["dilation"]
        kwargs = [(name, _per_axis(attrs[name], n)) for name in names]
        kwargs += [("groups", attrs["groups"]), ("bias", attrs.get("bias", True))]
        return ModuleCall(cls, (("in_channels", x[-n - 1]), ("out_channels", attrs["out_channels"])),
                          tuple(kwargs))

    return module


def _conv(n: int, transposed: bool) -> Operator:
    kind = "conv_transpose" if transposed else "conv"
    cls = f"{'ConvTranspose' if transposed else 'Conv'}{n}d"
    params = [Param("out_channels", "output channels", test_range=(1, 6)),
              Param("groups", "channel groups", test_range=(1, 4)),
              Param("padding", "zero padding per side", per_spatial=True, test_range=(0, 4))]
    if transposed:
        params.append(Param("output_padding", "extra size on one side", per_spatial=True,
                            test_range=(0, 3)))
    return Operator(
        name=f"{kind}{n}d", category="conv",
        description=f"nn.{cls}{' (fractionally strided)' if transposed else ''}",
        slots=(Slot("input", (n + 1, n + 2)),), rule=_conv_rule(n, transposed),
        torch_template="self.{module}({x})", module=_conv_module(f"nn.{cls}", transposed),
        attrs=(Spatial("kernel_size", (1, 2, 3, 3, 3, 4, 5, 7) if n < 3 else (1, 2, 3, 3, 3, 4, 5), n),
               Spatial("stride", (1, 1, 1, 2, 2, 3), n, asym=0.1),
               Spatial("dilation", (1, 1, 1, 1, 2, 3), n, asym=0.1),
               Choice("groups_mode", ("one", "one", "one", "grouped", "depthwise")),
               Choice("bias", (True, True, True, False))),
        params=tuple(params),
        torch_functions=(f"torch.nn.functional.{kind}{n}d", f"torch.{kind}{n}d"),
        module_types=(f"torch.nn.{cls}",),
    )


OPERATORS = tuple(_conv(n, transposed) for transposed in (False, True) for n in (1, 2, 3))
