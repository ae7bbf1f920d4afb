"""Layout glue: the few data-movement steps generated programs use between operators.

They are not compute operators (not in ``VOCABULARY``, not counted in k, no FLOPs): when an
operator needs a rank its input does not have, the generator flattens trailing axes
(``v.flatten(2)``) or adds leading ones (``v.unsqueeze(0)``), and it casts integer results
(argmax) with ``.float()`` before a floating-point operator. A result that feeds an input with a
narrower domain (the positive argument of ``log``, the (0, 1) one of ``asin``) goes through
``v.abs() + 0.5`` or ``torch.sigmoid(v)`` first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from drtriton.ops.shape import ShapeError


@dataclass(frozen=True)
class LayoutOp:
    """A data-movement step: ``rule(ctx, dims, attrs) -> dims`` and how to spell it."""

    name: str
    torch_template: str
    rule: Callable[[Any, list, dict], list]
    description: str
    torch_functions: tuple[str, ...] = ()
    tensor_methods: tuple[str, ...] = ()

    def apply(self, expr: str, attrs: dict) -> str:
        return self.torch_template.format(x=expr, **attrs)


def _flatten_rule(ctx, dims, attrs):
    start = attrs["start_dim"]
    if not 0 <= start < max(len(dims), 1):
        raise ShapeError(f"flatten: start_dim {start} out of range for rank {len(dims)}")
    return list(dims[:start]) + [ctx.mul(*dims[start:])]


def _unsqueeze_rule(ctx, dims, attrs):
    return [1] * attrs["count"] + list(dims)


FLATTEN = LayoutOp("flatten", "{x}.flatten({start_dim})", _flatten_rule, "merge axes start_dim.. into one",
                   torch_functions=("torch.flatten",), tensor_methods=("flatten",))
UNSQUEEZE = LayoutOp("unsqueeze", "{x}" + ".unsqueeze(0)", _unsqueeze_rule, "add `count` leading axes of size 1",
                     torch_functions=("torch.unsqueeze",), tensor_methods=("unsqueeze",))
TO_FLOAT = LayoutOp("to_float", "{x}.float()", lambda ctx, dims, attrs: list(dims), "cast to float32",
                    tensor_methods=("float", "to"))

TO_POSITIVE = LayoutOp("to_positive", "({x}.abs() + 0.5)", lambda ctx, dims, attrs: list(dims),
                       "into the positive domain (a divisor, a logarithm's argument)")
TO_UNIT = LayoutOp("to_unit", "torch.sigmoid({x})", lambda ctx, dims, attrs: list(dims),
                   "into (0, 1) (a probability, an arcsine's argument)")
TO_MASK = LayoutOp("to_mask", "({x} > 0)", lambda ctx, dims, attrs: list(dims), "into booleans (a condition)")
#: slot domain -> the glue that maps any real result into it
INTO_DOMAIN: dict[str, LayoutOp] = {"positive": TO_POSITIVE, "unit": TO_UNIT, "mask": TO_MASK}

LAYOUT: dict[str, LayoutOp] = {op.name: op for op in (FLATTEN, UNSQUEEZE, TO_FLOAT, TO_POSITIVE, TO_UNIT, TO_MASK)}

#: Callables and methods that move or view data without arithmetic (for capture and coverage).
DATA_MOVEMENT_FUNCTIONS = (
    "torch.flatten", "torch.unsqueeze", "torch.squeeze", "torch.reshape", "torch.permute",
    "torch.transpose", "torch.cat", "torch.stack", "torch.flip", "torch.narrow", "torch.select",
    "torch.zeros_like", "torch.ones_like", "torch.tensor", "operator.getitem",
)
DATA_MOVEMENT_METHODS = (
    "view", "reshape", "flatten", "unsqueeze", "squeeze", "permute", "transpose", "t", "T", "contiguous",
    "expand", "expand_as", "flip", "narrow", "select", "clone", "detach", "float", "to", "bool",
    "__getitem__", "unbind", "chunk", "split",
)


def unsqueeze_expr(expr: str, count: int) -> str:
    for _ in range(count):
        expr = UNSQUEEZE.apply(expr, {})
    return expr
