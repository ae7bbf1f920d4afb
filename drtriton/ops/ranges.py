"""Value ranges: which values an operator's output can take, given its inputs' ranges.

The generator uses them to keep programs meaningful: a divisor must stay away from zero, a
``relu`` fed only negative values is the constant 0 (its output would not depend on the inputs).
Elementwise operators get their range by evaluating their Triton scalar template with NumPy on
sample points of the input intervals (one formula, no per-operator range code); the result is
an estimate, good for spotting constant outputs and signs, not a proof.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Sequence

Range = tuple[float, float]
UNBOUNDED: Range = (-math.inf, math.inf)
NONNEG: Range = (0.0, math.inf)
UNIT: Range = (0.0, 1.0)

#: Magnitudes at or beyond this stand for infinity when sampling.
_HUGE = 1e30
_POINTS = 97


def _tl_shim():
    import numpy as np

    array = _array_type()
    erf = np.vectorize(math.erf, otypes=[float])
    return SimpleNamespace(
        exp=np.exp, log=np.log, abs=np.abs, sqrt=np.sqrt, sin=np.sin, cos=np.cos, floor=np.floor, ceil=np.ceil,
        # NumPy's maximum and minimum keep NaN: the templates' propagate_nan=tl.PropagateNan.ALL
        maximum=lambda a, b, propagate_nan=None: np.maximum(a, b),
        minimum=lambda a, b, propagate_nan=None: np.minimum(a, b), PropagateNan=SimpleNamespace(ALL="all", NONE="none"),
        float32=np.float32, float64=np.float64, int32=np.int32,
        # (these two return plain arrays: back to the type that takes `.to`)
        erf=lambda x: np.asarray(erf(x)).view(array), where=lambda c, a, b: np.asarray(np.where(c, a, b)).view(array),
    )


@functools.cache
def _array_type():
    """A NumPy array that also takes Triton's cast, `x.to(tl.float64)`, and its bit cast
    (`bitcast=True`: the same bits read as another type of that width); ufuncs keep the type."""
    import numpy as np

    class Array(np.ndarray):
        def to(self, dtype, bitcast=False):
            if bitcast:  # first to the source's kind at the target's width (float64 samples)
                size, src = np.dtype(dtype).itemsize, np.asarray(self)
                if src.dtype.itemsize != size:
                    src = src.astype(f"{'f' if src.dtype.kind == 'f' else 'i'}{size}")
                return src.view(dtype).view(Array)
            return np.asarray(self).astype(dtype).view(Array)

    return Array


def _samples(lo: float, hi: float):
    """Points covering [lo, hi], dense near zero and reaching 'infinity' where unbounded."""
    import numpy as np

    lo, hi = max(lo, -_HUGE), min(hi, _HUGE)
    if lo == hi:
        return np.array([lo])
    spread = np.sinh(np.linspace(np.arcsinh(lo), np.arcsinh(hi), _POINTS))
    return np.concatenate([[lo, hi, 0.0 if lo < 0 < hi else lo], spread, np.linspace(lo, hi, 33)])


def evaluate(expr: str, *arrays, dtype: str = "float64"):
    """Evaluate a Triton scalar expression over ``{x}`` (and ``{y}``) with NumPy arrays."""
    import numpy as np

    names = ("x", "y")[: len(arrays)]
    ns = {"tl": _tl_shim(), **{f"_{n}": np.asarray(a, dtype=dtype).view(_array_type()) for n, a in zip(names, arrays)}}
    code = expr.format(**{n: f"_{n}" for n in names})
    with np.errstate(all="ignore"):
        return np.asarray(eval(code, ns)).astype(dtype)  # noqa: S307 - our own templates


def image(expr: str, input_ranges: Sequence[Range]) -> Range:
    """Estimated range of the Triton scalar expression ``expr`` over ``{x}`` (and ``{y}``)."""
    import numpy as np

    grids = [_samples(*r) for r in input_ranges]
    if len(grids) == 2:
        a, b = np.meshgrid(grids[0], grids[1])
        grids = [a.ravel(), b.ravel()]
    values = evaluate(expr, *grids)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return UNBOUNDED
    lo, hi = float(values.min()), float(values.max())
    return (-math.inf if lo <= -_HUGE / 10 else lo, math.inf if hi >= _HUGE / 10 else hi)


# -- helpers for operators whose range is not elementwise ------------------------------------


def unbounded(ranges: Sequence[Range], attrs) -> Range:
    return UNBOUNDED


def nonneg(ranges: Sequence[Range], attrs) -> Range:
    return NONNEG


def unit(ranges: Sequence[Range], attrs) -> Range:
    return UNIT


def same_as_input(ranges: Sequence[Range], attrs) -> Range:
    return ranges[0]


def hull_with_zero(ranges: Sequence[Range], attrs) -> Range:
    lo, hi = ranges[0]
    return (min(lo, 0.0), max(hi, 0.0))


def accumulate(ranges: Sequence[Range], attrs) -> Range:
    """Sums (and cumulative sums) of many values keep only the sign."""
    lo, hi = ranges[0]
    if lo >= 0:
        return NONNEG
    if hi <= 0:
        return (-math.inf, 0.0)
    return UNBOUNDED


def product(ranges: Sequence[Range], attrs) -> Range:
    lo, hi = ranges[0]
    if 0 <= lo and hi <= 1:
        return UNIT
    if lo >= 0:
        return NONNEG
    if -1 <= lo and hi <= 1:
        return (-1.0, 1.0)
    return UNBOUNDED
