"""The language shape rules are written in, and its concrete and rank-only back ends.

Every operator states its shape rule once, as a function ``rule(ctx, dims, attrs)`` that returns
``(output_dims, flops)``. The rule only manipulates dimensions through ordinary ``+ - *`` with
integer constants and through the methods of ``ctx``; comparisons (``a == b``, ``a <= b``) are
passed to ``ctx.require``. The same rule therefore runs against three back ends:

- :class:`ConcreteContext` (here): dims are ints; ``require`` raises :class:`ShapeError` with the
  reason PyTorch would give. This is ``Operator.output_shape`` / ``Operator.flops``.
- :class:`RankContext` (here): dims are opaque placeholders; only the output *rank* and the
  rank checks matter. The generator uses it before any size is known.
- ``drtriton.ops.cpsat.CpSatContext``: dims are CP-SAT variables; ``require`` adds constraints.
  This is ``Operator.constrain`` and the synthesis model.

Because one function serves all three, the concrete rule and the CP-SAT rule cannot drift apart
except through the back ends themselves, which the tests compare on random shapes.

``ctx.guard`` states a condition PyTorch does not need but a *useful generated program* does
(a softmax over a dimension of size 1 is constant; a product over a long dimension overflows).
Only the generator's CP-SAT context enforces guards; ``output_shape`` ignores them.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Protocol, Sequence

Dim = Any  # int (concrete), a CP-SAT IntVar / linear expression, or a RankContext placeholder


class ShapeError(ValueError):
    """The input shapes or attributes are ones PyTorch rejects (the message says why)."""


class ShapeContext(Protocol):
    """What a shape rule may call. See the module docstring."""

    def param(self, name: str, *, lo: int = 0, hi: int | None = None, index: int | None = None,
              gen: tuple[int, int] | None = None, dist: str = "log") -> Dim:
        """An integer the operator needs that the input shapes do not fix (``out_channels``,
        one entry of ``padding``). Concretely it is read from ``attrs[name]`` (``[index]`` for
        per-dimension tuples); under CP-SAT it is a variable the solver chooses within ``gen``
        (``gen=(lo, None)``: up to the generator's cap on one dimension). ``lo``/``hi`` are
        PyTorch's own limits; ``dist`` is how the generator draws its target ("log"/"uniform")."""

    def require(self, cond: Any, reason: str) -> None: ...

    def guard(self, cond: Any, reason: str) -> None: ...

    def mul(self, *factors: Dim) -> Dim: ...

    def floordiv(self, expr: Dim, divisor: int) -> Dim: ...

    def quotient(self, value: Dim, divisor: Dim, reason: str) -> Dim:
        """``value // divisor``, requiring that it divides exactly."""

    def broadcast(self, a: Dim, b: Dim) -> Dim:
        """The broadcast of two aligned dimensions (equal, or one of them is 1)."""


def broadcast_shapes(ctx: ShapeContext, *shapes: Sequence[Dim]) -> list[Dim]:
    """NumPy/PyTorch broadcasting of whole shapes, aligned on the right."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for axis in range(rank):
        result: Dim = None
        for shape in shapes:
            offset = len(shape) - rank + axis
            if offset < 0:
                continue
            result = shape[offset] if result is None else ctx.broadcast(result, shape[offset])
        out.append(result)
    return out


class ConcreteContext:
    """Integer back end: the rule *is* PyTorch's shape check.

    ``param_source(name, index, lo, hi)`` supplies parameters missing from ``attrs`` (the
    property tests draw them); what it supplies is kept in ``drawn``.
    """

    def __init__(self, attrs: Mapping[str, Any],
                 param_source: Callable[[str, int | None, int, int | None], int] | None = None):
        self.attrs = attrs
        self.param_source = param_source
        self.drawn: dict[str, Any] = {}

    def param(self, name, *, lo=0, hi=None, index=None, gen=None, dist="log"):
        if name in self.attrs:
            value = self.attrs[name]
            if index is not None and isinstance(value, (tuple, list)):
                value = value[index]
        elif self.param_source is not None:
            value = self.param_source(name, index, lo, hi)
            if index is None:
                self.drawn[name] = value
            else:
                self.drawn.setdefault(name, []).append(value)
        else:
            raise ShapeError(f"missing attribute {name!r}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShapeError(f"{name} must be an int, got {value!r}")
        if value < lo or (hi is not None and value > hi):
            bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise ShapeError(f"{name} must be {bound}, got {value}")
        return value

    def require(self, cond, reason):
        if not cond:
            raise ShapeError(reason)

    def guard(self, cond, reason):
        pass

    def mul(self, *factors):
        return math.prod(factors)

    def floordiv(self, expr, divisor):
        return expr // divisor

    def quotient(self, value, divisor, reason):
        if divisor <= 0 or value % divisor:
            raise ShapeError(f"{reason} (got {value} and {divisor})")
        return value // divisor

    def broadcast(self, a, b):
        if a == b or b == 1:
            return a
        if a == 1:
            return b
        raise ShapeError(f"shapes do not broadcast: {a} vs {b}")


class _Placeholder:
    """A dimension whose value is unknown: arithmetic and comparisons all succeed."""

    def _same(self, *_):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = _same
    __eq__ = __ne__ = __le__ = __lt__ = __ge__ = __gt__ = _same
    __hash__ = object.__hash__

    def __bool__(self):
        return True


class RankContext:
    """Rank-only back end: runs a rule without sizes to learn its output rank and rank checks."""

    def __init__(self, attrs: Mapping[str, Any], guards: bool = False):
        self.attrs = attrs
        self.guards = guards

    def param(self, name, *, lo=0, hi=None, index=None, gen=None, dist="log"):
        return _Placeholder()

    def require(self, cond, reason):
        if cond is False:  # a check between ranks or attribute constants can fail without sizes
            raise ShapeError(reason)

    def guard(self, cond, reason):
        if self.guards:
            self.require(cond, reason)

    def mul(self, *factors):
        return _Placeholder()

    def floordiv(self, expr, divisor):
        return _Placeholder()

    def quotient(self, value, divisor, reason):
        return _Placeholder()

    def broadcast(self, a, b):
        return _Placeholder()

    @staticmethod
    def placeholders(ranks: Sequence[int]) -> list[list[Dim]]:
        return [[_Placeholder() for _ in range(r)] for r in ranks]
