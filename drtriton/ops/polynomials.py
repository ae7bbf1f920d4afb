"""Orthogonal polynomials of torch.special (Chebyshev T, U, V, W and their shifted forms, Hermite H
and He, Laguerre L, Legendre P): elementwise in (x, n), each a three-term recurrence run n times.

A recurrence is a loop, which one expression cannot hold: each record's template calls a
``@triton.jit`` helper (``Operator.triton_helpers``) that a module defines once, whatever the
kernels calling it. The helper follows PyTorch's kernel (ATen/native/Math.h) branch for branch:
n cast to int64 (NaN and infinities to a negative degree, as on x86), 0 below degree 0, the
special values at the interval's ends, the closed forms PyTorch takes for large n inside it
(cos(n acos x)...), Hermite's NaN above degree 128 (512 in float64), else the recurrence. A block's
elements have their own degrees: the loop runs to the largest degree among the elements the
recurrence decides, and each element keeps its value from the step that reaches its own n.
"""

from __future__ import annotations

import math

from drtriton.ops.elementwise import atan, broadcast_fresh, broadcast_rule
from drtriton.ops.operator import ANY_RANK, Operator, Slot

# acos(t) = 2 atan(sqrt((1 - t) / (1 + t))) for |t| < 1 (the vocabulary's acos), of t in float64
_ACOS = "2.0 * " + atan("tl.sqrt((1.0 - t64) / (1.0 + t64))")
_ODD = "tl.where(even, 1.0, -1.0)"  # (-1)^n


def _helper(name: str, *, t: str, q1: str, step: str, first: int, shift: int, specials=(), closed=None,
            limit: bool = False) -> str:
    """The helper's source. `t`: the recurrence's argument (x, or 2x - 1 for the shifted forms);
    `q1`: the degree-1 value; `step`: r from p, q at loop index k, giving degree k + `shift`;
    `specials`: (condition, value) in PyTorch's order of precedence; `closed`: (lowest degree
    excluded, value over a = acos(t), t64 and nf64: t and n in float64) used for |t| < 1;
    `limit`: Hermite's NaN above 128 / 512."""
    lines = [
        "@triton.jit",
        f"def {name}(x, n):",
        f"    # torch.special.{name[1:]} as in ATen/native/Math.h (drtriton/ops/polynomials.py)",
        "    n = n + tl.zeros_like(x)  # a literal degree, or a block: x's shape and dtype",
        "    one = tl.zeros_like(n) + 1.0",
        "    x = x * one",
        "    # static_cast<int64_t>: NaN, infinities and out-of-range values become negative (x86)",
        "    nk = tl.where(tl.abs(n) < 9.2e18, n, -1.0).to(tl.int64)",
        "    nf = nk.to(x.dtype)",
        "    even = nk % 2 == 0",
        f"    t = {t}",
        "    loop = nk > 1",
    ]
    for cond, _ in specials:
        lines.append(f"    loop = loop & ~({cond})")
    if closed is not None:
        lines.append(f"    closed = (nk > {closed[0]}) & (tl.abs(t) < 1.0)")
        lines.append("    loop = loop & ~closed")
    if limit:
        lines += ["    if x.dtype == tl.float64:", "        top = 512", "    else:", "        top = 128",
                  "    loop = loop & (nk <= top)"]
    lines += [
        f"    q = {q1}",
        "    p = one",
        "    r = q",
        "    out = tl.where(nk == 1, q, one)",
        "    # each element's value is r at the step reaching its degree",
        f"    for k in range({first}, tl.max(tl.where(loop, nk, 0)){' + 1' if shift == 0 else ''}):",
        f"        r = {step}",
        "        p = q",
        "        q = r",
        f"        out = tl.where(nk == k{' + 1' if shift else ''}, r, out)",
    ]
    if closed is not None:
        # in float64: an error in acos grows n times in n acos(t); rounded once, to x's dtype
        lines += ["    t64 = t.to(tl.float64)", "    nf64 = nf.to(tl.float64)", f"    a = {_ACOS}",
                  f"    out = tl.where(closed, ({closed[1]}).to(x.dtype), out)"]
    if limit:
        lines.append("    out = tl.where(nk > top, float('nan'), out)")
    for cond, value in reversed(specials):  # the first one listed wins
        lines.append(f"    out = tl.where({cond}, {value}, out)")
    lines.append("    return tl.where(nk < 0, 0.0, out)")
    return "\n".join(lines)


def _chebyshev(kind: str, shifted: bool) -> tuple[str, str]:
    """Chebyshev T, U, V, W (shifted: of 2x - 1, PyTorch's special values at x = 1 and x = 0)."""
    q1 = {"t": "t", "u": "t + t", "v": "t + t - 1.0", "w": "t + t + 1.0"}[kind]
    top, bottom = ("x == 1.0", "x == 0.0") if shifted else ("x == 1.0", "x == -1.0")
    # values at t = 1 and t = -1
    ends = {"t": ("one", _ODD), "u": ("nf + 1.0", f"{_ODD} * (nf + 1.0)"),
            "v": ("one", f"{_ODD} * (nf + nf + 1.0)"), "w": ("nf + nf + 1.0", _ODD)}[kind]
    specials = ((top, ends[0]), (bottom, ends[1]))
    # the closed forms; where their denominator vanishes, PyTorch's fallbacks
    closed = {
        "t": "tl.cos(nf64 * a)",
        "u": "tl.where(tl.sin(a) != 0.0, tl.sin((nf64 + 1.0) * a) / tl.sin(a), "
             "(nf64 + 1.0) * tl.cos((nf64 + 1.0) * a) / t64)",
        "v": f"tl.where(tl.sin(a / 2.0) != 1.0, tl.cos((nf64 + 0.5) * a) / tl.cos(a / 2.0), {_ODD} * (nf + nf + 1.0))",
        "w": "tl.where(tl.cos(a / 2.0) != 1.0, tl.sin((nf64 + 0.5) * a) / tl.sin(a / 2.0), "
             + (_ODD if shifted else f"tl.where(x > 0.0, nf + nf + 1.0, {_ODD})") + ")",
    }[kind]
    lowest = (4 if kind == "w" else 6) if shifted else (6 if kind == "t" else 8)
    name = f"_{'shifted_' if shifted else ''}chebyshev_polynomial_{kind}"
    source = _helper(name, t="x + x - 1.0" if shifted else "x", q1=q1, step="(t + t) * q - p", first=2, shift=0,
                     specials=specials, closed=(lowest, closed))
    return name, source


_OTHERS = {
    "hermite_polynomial_h": dict(t="x", q1="x + x", step="(x + x) * q - (k + k) * p", first=1, shift=1, limit=True),
    "hermite_polynomial_he": dict(t="x", q1="x", step="x * q - k * p", first=1, shift=1, limit=True),
    "laguerre_polynomial_l": dict(t="x", q1="1.0 - x", step="(((k + k) + (1.0 - x)) * q - k * p) / (k + 1)",
                                  first=1, shift=1, specials=(("x == 0.0", "one"),)),
    "legendre_polynomial_p": dict(t="x", q1="x", step="((k + k + 1) * x * q - k * p) / (k + 1)", first=1, shift=1,
                                  specials=(("x == 1.0", "one"), ("x == -1.0", _ODD))),
}

_DESCRIPTIONS = {
    "t": "Chebyshev polynomial of the first kind", "u": "Chebyshev polynomial of the second kind",
    "v": "Chebyshev polynomial of the third kind", "w": "Chebyshev polynomial of the fourth kind",
    "hermite_polynomial_h": "physicists' Hermite polynomial",
    "hermite_polynomial_he": "probabilists' Hermite polynomial",
    "laguerre_polynomial_l": "Laguerre polynomial", "legendre_polynomial_p": "Legendre polynomial",
}


def _record(name: str, helper: str, source: str, description: str) -> Operator:
    fn = f"torch.special.{name}"
    return Operator(
        name=name, category="elementwise_binary",
        # the degree is a tensor too (cast to int64 per element); named n for the checks' inputs
        slots=(Slot("input", ANY_RANK), Slot("n", ANY_RANK)), rule=broadcast_rule,
        torch_template=fn + "({x}, {y})", triton_template=f"{helper}({{x}}, {{y}})", triton_helpers=(source,),
        description=description + " of degree n (a tensor), broadcasting", torch_functions=(fn,),
        fresh=broadcast_fresh, value_range=lambda ranges, attrs: (-math.inf, math.inf), drawn=False,
    )


def _operators() -> tuple[Operator, ...]:
    out = []
    for shifted in (False, True):
        for kind in "tuvw":
            helper, source = _chebyshev(kind, shifted)
            out.append(_record(helper[1:], helper, source,
                               f"shifted {_DESCRIPTIONS[kind]}, {kind.upper()}(2x - 1)," if shifted
                               else _DESCRIPTIONS[kind]))
    for name, parts in _OTHERS.items():
        out.append(_record(name, f"_{name}", _helper(f"_{name}", **parts), _DESCRIPTIONS[name]))
    return tuple(out)


OPERATORS = _operators()
