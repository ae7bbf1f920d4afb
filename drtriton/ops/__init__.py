"""The operator vocabulary: the one place each primitive PyTorch operator is defined.

``VOCABULARY`` maps vocabulary names to :class:`Operator` records (see its docstring for the
interface), in a fixed order grouped by category; ``get(name)`` looks one up; ``CATEGORIES``
lists the categories. Importing this package imports neither torch nor OR-Tools.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Mapping

from drtriton.ops import (conv, elementwise, factorization, incomplete_gamma, indexing, linalg, loss, norm, polynomials,
                          pool, recurrent, reduce, sort, zeta)
from drtriton.ops.layout import LAYOUT, LayoutOp
from drtriton.ops.operator import (ANY_RANK, CATEGORIES, DOMAINS, Axis, Choice, ModuleCall, Operator, Param,
                                   Slot, Spatial)
from drtriton.ops.shape import ShapeError

_ALL = (elementwise.OPERATORS + polynomials.OPERATORS + incomplete_gamma.OPERATORS + zeta.OPERATORS + linalg.OPERATORS
        + conv.OPERATORS + pool.OPERATORS + norm.OPERATORS + reduce.OPERATORS + sort.OPERATORS + loss.OPERATORS
        + indexing.OPERATORS + recurrent.OPERATORS + factorization.OPERATORS)

#: name -> Operator, ordered by category then definition.
VOCABULARY: Mapping[str, Operator] = MappingProxyType(
    {op.name: op for cat in CATEGORIES for op in _ALL if op.category == cat})

if len(VOCABULARY) != len(_ALL):  # pragma: no cover - a definition error, caught at import
    raise RuntimeError("duplicate operator names in the vocabulary")

NAMES: tuple[str, ...] = tuple(VOCABULARY)
#: what synthesis draws from, uniformly: every operator but the piecewise-constant ones
SYNTH_NAMES: tuple[str, ...] = tuple(name for name, op in VOCABULARY.items() if op.drawn)


#: helper name -> the source of a `@triton.jit` function elementwise templates call
HELPERS: Mapping[str, str] = MappingProxyType(
    {re.search(r"def (\w+)\(", src).group(1): src for op in VOCABULARY.values() for src in op.triton_helpers})


def called_helpers(code: str) -> list[str]:
    """The sources of the helpers `code` calls, and of those they call, each once (Triton looks
    a helper up when it compiles a caller: their order in the file does not matter)."""
    wanted: set[str] = set()
    todo = [code]
    while todo:
        text = todo.pop()
        for name, src in HELPERS.items():
            if name not in wanted and re.search(r"\b" + name + r"\(", text):
                wanted.add(name)
                todo.append(src)
    return [src for name, src in HELPERS.items() if name in wanted]


def get(name: str) -> Operator:
    """The operator called ``name``; a KeyError listing the valid names otherwise."""
    try:
        return VOCABULARY[name]
    except KeyError:
        raise KeyError(f"unknown operator {name!r}; valid names: {', '.join(NAMES)}") from None


def by_category(category: str) -> tuple[Operator, ...]:
    if category not in CATEGORIES:
        raise KeyError(f"unknown category {category!r}; valid: {', '.join(CATEGORIES)}")
    return tuple(op for op in VOCABULARY.values() if op.category == category)


__all__ = [
    "ANY_RANK", "CATEGORIES", "DOMAINS", "LAYOUT", "NAMES", "SYNTH_NAMES", "VOCABULARY", "Axis", "Choice", "LayoutOp",
    "ModuleCall", "Operator", "Param", "ShapeError", "Slot", "Spatial", "by_category", "get", "HELPERS",
    "called_helpers",
]
