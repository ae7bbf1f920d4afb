"""Elementwise operators: activations, arithmetic with a scalar, and binary ops with broadcasting.

FLOPs: one per output element (KernelBench-style counting; transcendental cost is not weighed).
Each operator has a Triton scalar template over ``{x}`` (and ``{y}``) built from ``tl.*`` only:
no ``libdevice`` (broken in the Triton interpreter) and no ``tl.math.tanh`` (missing in some
releases). Where the naive formula loses relative accuracy near zero (``exp(x) - 1``,
``log(1 + y)``, ``tanh``) a short Taylor branch takes over, so templates match PyTorch to
about 1e-6 relative.
"""

from __future__ import annotations

import dataclasses
import math
import random

from drtriton.ops.operator import ANY_RANK, Choice, Operator, Slot
from drtriton.ops.shape import broadcast_shapes

# -- Triton building blocks (each takes an expression string, returns one) ---------------------


def _poly(e: str, coeffs: tuple[float, ...]) -> str:
    """c0 + e*(c1 + e*(c2 + ...)) in Horner form."""
    text = repr(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        text = f"{c!r} + {e} * ({text})"
    return f"({text})"


def expm1(e: str) -> str:
    small = f"{e} * {_poly(e, (1.0, 0.5, 1 / 6, 1 / 24, 1 / 120))}"
    return f"tl.where(tl.abs({e}) < 0.1, {small}, tl.exp({e}) - 1.0)"


def log1p(e: str) -> str:
    """log(1 + e) for e >= 0."""
    small = f"{e} * {_poly(e, (1.0, -1 / 2, 1 / 3, -1 / 4, 1 / 5))}"
    return f"tl.where({e} < 0.05, {small}, tl.log(1.0 + {e}))"


def tanh(e: str) -> str:
    sq = f"{e} * {e}"
    small = f"{e} * {_poly(sq, (1.0, -1 / 3, 2 / 15, -17 / 315))}"
    t = f"tl.exp(-2.0 * tl.abs({e}))"
    large = f"tl.where({e} >= 0.0, 1.0, -1.0) * (1.0 - {t}) / (1.0 + {t})"
    return f"tl.where(tl.abs({e}) < 0.1, {small}, {large})"


def softplus(e: str) -> str:
    """log(1 + exp(e)) without overflow."""
    return f"(tl.maximum({e}, 0.0) + {log1p(f'tl.exp(-tl.abs({e}))')})"


def sigmoid(e: str) -> str:
    return f"(1.0 / (1.0 + tl.exp(-{e})))"


def log1p_any(e: str) -> str:
    """log(1 + e) for any e > -1 (a series near zero, where 1 + e would round)."""
    small = f"{e} * {_poly(e, (1.0, -1 / 2, 1 / 3, -1 / 4, 1 / 5, -1 / 6))}"
    return f"tl.where(tl.abs({e}) < 0.01, {small}, tl.log(1.0 + {e}))"


def trunc(e: str) -> str:
    return f"tl.where({e} >= 0.0, tl.floor({e}), tl.ceil({e}))"


def atan(e: str) -> str:
    """arctan: halve the angle twice (|t| <= tan(pi/8), then tan(pi/16)), an odd series, and
    a reflection for |e| > 1 (atan(e) = pi/2 - atan(1/e))."""
    a = f"tl.abs({e})"
    r = f"tl.where({a} > 1.0, 1.0 / {a}, {a})"
    h1 = f"({r} / (1.0 + tl.sqrt(1.0 + {r} * {r})))"
    h2 = f"({h1} / (1.0 + tl.sqrt(1.0 + {h1} * {h1})))"
    series = f"4.0 * {h2} * {_poly(f'{h2} * {h2}', (1.0, -1 / 3, 1 / 5, -1 / 7, 1 / 9, -1 / 11))}"
    folded = f"tl.where({a} > 1.0, 1.5707963267948966 - {series}, {series})"
    return f"tl.where({e} < 0.0, -{folded}, {folded})"


def sinh(e: str) -> str:
    sq = f"{e} * {e}"
    small = f"{e} * {_poly(sq, (1.0, 1 / 6, 1 / 120, 1 / 5040))}"
    return f"tl.where(tl.abs({e}) < 0.1, {small}, 0.5 * (tl.exp({e}) - tl.exp(-{e})))"


def _erfc_parts(e: str) -> tuple[str, str]:
    """Numerical Recipes' erfcc for e >= 0 as t * exp(-e^2 + inner): (t, inner)."""
    t = f"(1.0 / (1.0 + 0.5 * tl.abs({e})))"
    inner = _poly(t, (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
                      1.48851587, -0.82215223, 0.17087277))
    return t, inner


def erfcx(e: str) -> str:
    """exp(e^2) erfc(e): erfcc's t * exp(inner) with the exp(-e^2) factor left out (no overflow
    or underflow for large e); 2 exp(e^2) - erfcx(-e) below 0 (inf below about -9.4)."""
    t, inner = _erfc_parts(e)
    return f"tl.where({e} >= 0.0, {t} * tl.exp({inner}), 2.0 * tl.exp({e} * {e}) - {t} * tl.exp({inner}))"


# Modified Bessel functions of order 0 and 1 (Numerical Recipes' bessi0 / bessi1: polynomials in
# (x / 3.75)^2 below 3.75, in 3.75 / |x| times e^|x| / sqrt|x| above; relative error under 2e-7)
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633,
             0.00392377)
_I1_SMALL = (0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411)
_I1_LARGE = (0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312, 0.01787654,
             -0.00420059)


def bessel_i(e: str, order: int, scaled: bool) -> str:
    """I0 or I1 of e, times exp(-|e|) when `scaled` (i0e, i1e: no overflow)."""
    ax = f"tl.abs({e})"
    y = f"(({e} / 3.75) * ({e} / 3.75))"
    small = _poly(y, _I0_SMALL) if order == 0 else f"({ax} * {_poly(y, _I1_SMALL)})"
    if scaled:
        small = f"({small} * tl.exp(-{ax}))"
    growth = f"(1.0 / tl.sqrt({ax}))" if scaled else f"(tl.exp({ax}) / tl.sqrt({ax}))"
    large = f"({_poly(f'(3.75 / {ax})', _I0_LARGE if order == 0 else _I1_LARGE)} * {growth})"
    value = f"tl.where({ax} < 3.75, {small}, {large})"
    return value if order == 0 else f"tl.where({e} < 0.0, -{value}, {value})"


# Bessel functions of the first and second kinds, J and Y of orders 0 and 1 (Numerical Recipes'
# bessj0/bessj1/bessy0/bessy1: a rational function of x^2 below 8, the Hankel asymptotic form
# sqrt(2 / (pi x)) (cos(x - phase) P - (8 / x) sin(x - phase) Q) above; absolute error about 1e-8)
_J_SMALL = {0: ((57568490574.0, -13362590354.0, 651619640.7, -11214424.18, 77392.33017, -184.9052456),
                (57568490411.0, 1029532985.0, 9494680.718, 59272.64853, 267.8532712, 1.0)),
            1: ((72362614232.0, -7895059235.0, 242396853.1, -2972611.439, 15704.48260, -30.16036606),
                (144725228442.0, 2300535178.0, 18583304.74, 99447.43394, 376.9991397, 1.0))}
_Y_SMALL = {0: ((-2957821389.0, 7062834065.0, -512359803.6, 10879881.29, -86327.92757, 228.4622733),
                (40076544269.0, 745249964.8, 7189466.438, 47447.26470, 226.1030244, 1.0)),
            1: ((-0.4900604943e13, 0.1275274390e13, -0.5153438139e11, 0.7349264551e9, -0.4237922726e7,
                 0.8511937935e4),
                (0.2499580570e14, 0.4244419664e12, 0.3733650367e10, 0.2245904002e8, 0.1020426050e6,
                 0.3549632885e3, 1.0))}
_HANKEL = {0: ((1.0, -0.1098628627e-2, 0.2734510407e-4, -0.2073370639e-5, 0.2093887211e-6),
               (-0.1562499995e-1, 0.1430488765e-3, -0.6911147651e-5, 0.7621095161e-6, -0.934935152e-7)),
           1: ((1.0, 0.183105e-2, -0.3516396496e-4, 0.2457520174e-5, -0.240337019e-6),
               (0.04687499995, -0.2002690873e-3, 0.8449199096e-5, -0.88228987e-6, 0.105787412e-6))}
_PHASE = {0: 0.785398164, 1: 2.356194491}  # pi/4, 3 pi/4
_TWO_OVER_PI = 0.636619772


def _hankel(a: str, order: int, kind: str) -> str:
    """The large-argument form at a > 0: J (cos P - z sin Q) or Y (sin P + z cos Q), z = 8 / a."""
    z = f"(8.0 / {a})"
    xx = f"({a} - {_PHASE[order]!r})"
    p, q = (_poly(f"({z} * {z})", c) for c in _HANKEL[order])
    waves = (f"tl.cos({xx}) * {p} - {z} * tl.sin({xx}) * {q}" if kind == "j" else
             f"tl.sin({xx}) * {p} + {z} * tl.cos({xx}) * {q}")
    return f"(tl.sqrt({_TWO_OVER_PI!r} / {a}) * ({waves}))"


def _in_float64(e: str, value) -> str:
    """value(e) evaluated in float64 and rounded to the result's dtype (e's floating dtype; float32
    for an integer e, as PyTorch): the rational functions of J and Y cancel to about 1e-6 in
    float32 near their zeros; in float64 only the fit's own 1e-8 is left."""
    return f"({value(f'({e}).to(tl.float64)')}).to(({e} + 0.0).dtype)"


def bessel_j(e: str, order: int) -> str:
    """J0 or J1 of e (J1 is odd)."""
    return _in_float64(e, lambda x: _bessel_j(x, order))


def bessel_y(e: str, order: int) -> str:
    """Y0 or Y1 of e: -inf at 0, nan below (the logarithm's)."""
    return _in_float64(e, lambda x: _bessel_y(x, order))


def _bessel_j(e: str, order: int) -> str:
    y = f"({e} * {e})"
    num, den = _J_SMALL[order]
    small = f"({_poly(y, num)} / {_poly(y, den)})" + (f" * {e}" if order else "")
    large = _hankel(f"tl.abs({e})", order, "j")
    if order:
        large = f"tl.where({e} < 0.0, -{large}, {large})"
    return f"tl.where(tl.abs({e}) < 8.0, {small}, {large})"


def _bessel_y(e: str, order: int) -> str:
    y = f"({e} * {e})"
    num, den = _Y_SMALL[order]
    rational = f"({_poly(y, num)} / {_poly(y, den)})" + (f" * {e}" if order else "")
    if order == 0:
        small = f"{rational} + {_TWO_OVER_PI!r} * {_bessel_j(e, 0)} * tl.log({e})"
    else:  # J1(0) log(0) is 0 * -inf: the limit -inf is written out
        small = (f"tl.where({e} == 0.0, -1.0 / tl.abs({e} * 0.0), "
                 f"{rational} + {_TWO_OVER_PI!r} * ({_bessel_j(e, 1)} * tl.log({e}) - 1.0 / {e}))")
    return f"tl.where({e} < 8.0, {small}, {_hankel(e, order, 'y')})"


# Modified Bessel functions of the second kind (Numerical Recipes' bessk0 / bessk1: -log(x/2) I(x)
# plus a polynomial in x^2/4 up to 2, e^-x / sqrt(x) times a polynomial in 2/x above; relative
# error under 2e-7)
_K_SMALL = {0: (-0.57721566, 0.42278420, 0.23069756, 0.3488590e-1, 0.262698e-2, 0.10750e-3, 0.74e-5),
            1: (1.0, 0.15443144, -0.67278579, -0.18156897, -0.1919402e-1, -0.110404e-2, -0.4686e-4)}
_K_LARGE = {0: (1.25331414, -0.7832358e-1, 0.2189568e-1, -0.1062446e-1, 0.587872e-2, -0.251540e-2, 0.53208e-3),
            1: (1.25331414, 0.23498619, -0.3655620e-1, 0.1504268e-1, -0.780353e-2, 0.325614e-2, -0.68245e-3)}


def bessel_k(e: str, order: int, scaled: bool) -> str:
    """K0 or K1 of e, times exp(e) when `scaled`: inf at 0, nan below 0."""
    y = f"({e} * {e} * 0.25)"
    if order == 0:
        small = f"(-tl.log({e} * 0.5) * {bessel_i(e, 0, False)} + {_poly(y, _K_SMALL[0])})"
    else:
        small = f"(tl.log({e} * 0.5) * {bessel_i(e, 1, False)} + (1.0 / {e}) * {_poly(y, _K_SMALL[1])})"
    if scaled:
        small = f"({small} * tl.exp({e}))"
    growth = f"(1.0 / tl.sqrt({e}))" if scaled else f"(tl.exp(-{e}) / tl.sqrt({e}))"
    value = f"tl.where({e} <= 2.0, {small}, {growth} * {_poly(f'(2.0 / {e})', _K_LARGE[order])})"
    return value if order == 0 else f"tl.where({e} == 0.0, 1.0 / tl.abs({e} * 0.0), {value})"  # I1(0) log(0): 0 * -inf


def spherical_bessel_j0(e: str) -> str:
    """sin(e) / e: its series below 0.5 (1 at 0), 0 at +-inf."""
    y = f"({e} * {e})"
    series = _poly(y, (1.0, -1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800))
    return (f"tl.where(tl.abs({e}) < 0.5, {series}, "
            f"tl.where(tl.abs({e}) > 3.0e38, 0.0, tl.sin({e}) / {e}))")


def erfc(e: str) -> str:
    """1 - erf(e) to about 1e-7 relative everywhere (Numerical Recipes' erfcc: a rational
    Chebyshev fit times exp(-e^2) for e >= 0, reflected as 2 - erfc(-e)); 1 - erf itself near 0."""
    t, inner = _erfc_parts(e)
    tail = f"{t} * tl.exp(-{e} * {e} + {inner})"
    return (f"tl.where(tl.abs({e}) < 0.5, 1.0 - tl.erf({e}), "
            f"tl.where({e} >= 0.0, {tail}, 2.0 - {tail}))")


# Lanczos (g = 7, 9 terms, Numerical Recipes / Boost's coefficients): Gamma(z + 1) =
# sqrt(2 pi) t^(z + 0.5) e^-t A(z) with t = z + 7.5, for z >= -0.5 (the reflection covers the rest)
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
_HALF_LOG_2PI = 0.9189385332046727


def _near_int_offset(e: str) -> str:
    """e minus its nearest integer, exact in floating point: |sin(pi e)| = |sin(pi f)| computed
    from it keeps its accuracy near the poles (pi * e itself is off by ulp(pi * e))."""
    return f"({e} - tl.floor({e} + 0.5))"


def lgamma(e: str) -> str:
    """log|Gamma(e)| in fp32 arithmetic: the Lanczos sum for e >= 0.5, and for e < 0.5 the
    reflection log(pi / |sin(pi e)|) - lgamma(1 - e) (poles at 0, -1, ...: inf)."""
    z = f"(tl.where({e} < 0.5, 1.0 - {e}, {e}) - 1.0)"
    series = " + ".join([repr(_LANCZOS[0])] + [f"{c!r} / ({z} + {float(i)!r})" for i, c in enumerate(_LANCZOS[1:], 1)])
    t = f"({z} + 7.5)"
    right = f"({_HALF_LOG_2PI!r} + ({z} + 0.5) * tl.log({t}) - {t} + tl.log({series}))"
    left = f"(tl.log({math.pi!r} / tl.abs(tl.sin({math.pi!r} * {_near_int_offset(e)}))) - {right})"
    return f"tl.where(tl.abs({e}) > 3.0e38, tl.abs({e}), tl.where({e} < 0.5, {left}, {right}))"  # +-inf: inf


def digamma(e: str) -> str:
    """psi(e): six steps of the recurrence psi(y) = psi(y + 1) - 1/y, then the asymptotic series
    at y + 6 (error under 1e-8); for e < 0.5 the reflection psi(1 - e) - pi / tan(pi e)."""
    y = f"tl.where({e} < 0.5, 1.0 - {e}, {e})"
    w = f"({y} + 6.0)"
    inv2 = f"(1.0 / ({w} * {w}))"
    series = (f"(tl.log({w}) - 0.5 / {w} - {inv2} * {_poly(inv2, (1 / 12, -1 / 120, 1 / 252, -1 / 240))})")
    steps = " + ".join(f"1.0 / ({y} + {float(k)!r})" for k in range(6))
    right = f"({series} - ({steps}))"
    f = _near_int_offset(e)  # cot has period pi: cot(pi e) = cot(pi f), without fp32's error in pi * e
    value = f"tl.where({e} < 0.5, {right} - {math.pi!r} * tl.cos({math.pi!r} * {f}) / tl.sin({math.pi!r} * {f}), {right})"
    return f"tl.where(({e} < 0.0) & ({e} == tl.floor({e})), ({e} - {e}) / 0.0, {value})"  # negative integers: nan


def erfinv(e: str) -> str:
    """The inverse error function on (-1, 1) (Giles, "Approximating the erfinv function", single
    precision: two polynomials in w = -log(1 - e^2)); +-inf at +-1 (w infinite)."""
    w = f"(-tl.log((1.0 - {e}) * (1.0 + {e})))"
    return f"tl.where({w} > 3.0e38, {e} / 0.0, tl.where({w} < 5.0, {_giles_central(w)}, {_giles_tail(w)}) * {e})"


def _giles_central(w: str) -> str:
    return _poly(f"({w} - 2.5)", (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
                                  -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08))


def _giles_tail(w: str) -> str:
    return _poly(f"(tl.sqrt({w}) - 3.0)", (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
                                            -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257))


# Acklam's rational approximation of the normal quantile's tails, in q = sqrt(-2 log p)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
             4.374664141464968e+00, 2.938163982698783e+00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)


def ndtri(e: str) -> str:
    """The standard normal quantile: sqrt(2) erfinv(2p - 1) with Giles' central polynomial for
    0.02425 <= p <= 0.97575, w = -log(4p(1 - p)) taken from p (no cancellation); Acklam's
    rational function of sqrt(-2 log p) in the tails, however small p is; -inf, inf at 0, 1."""
    def tail(p: str) -> str:
        q = f"tl.sqrt(-2.0 * tl.log({p}))"
        return f"({_poly(q, _ACKLAM_C[::-1])} / {_poly(q, (1.0, *_ACKLAM_D[::-1]))})"
    w = f"(-tl.log(4.0 * {e} * (1.0 - {e})))"
    central = f"({math.sqrt(2.0)!r} * {_giles_central(w)} * (2.0 * {e} - 1.0))"
    value = f"tl.where({e} < 0.02425, {tail(e)}, tl.where({e} > 0.97575, -{tail(f'(1.0 - {e})')}, {central}))"
    return f"tl.where({e} == 0.0, ({e} - 1.0) / 0.0, tl.where({e} == 1.0, {e} / 0.0, {value}))"


_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805

# -- shape rules ----------------------------------------------------------------------------------


def same_shape(ctx, dims, attrs):
    out = list(dims[0])
    return out, ctx.mul(*out)


def broadcast_rule(ctx, dims, attrs):
    out = broadcast_shapes(ctx, *dims)
    return out, ctx.mul(*out)


def broadcast_fresh(rng: random.Random, slot: int, anchor_slot: int, anchor_rank: int) -> list:
    """Shape of a new operand broadcast against an existing one: the full shape, a per-channel
    bias (C, 1, ..., 1), a row over the last axis, a (1,) scalar, or a random mask of kept axes."""
    r = anchor_rank
    if r == 0:
        return []
    kind = rng.random()
    if kind < 0.45:
        return list(range(r))
    if kind < 0.65 and r >= 2:
        return [1] + ["one"] * (r - 2)
    if kind < 0.8:
        return [r - 1]
    if kind < 0.9:
        return ["one"]
    kept = rng.randint(1, r)
    return [a if rng.random() < 0.6 else "one" for a in range(r - kept, r)]


# -- constructors ---------------------------------------------------------------------------------


def _unary(name, torch_template, triton_template, description, *, attrs=(), fns=(), methods=(),
           modules=()):
    return Operator(
        name=name, category="elementwise_unary", slots=(Slot("input", ANY_RANK),), rule=same_shape,
        torch_template=torch_template, triton_template=triton_template, description=description,
        attrs=attrs, torch_functions=fns, tensor_methods=methods, module_types=modules,
    )


def _binary(name, torch_template, triton_template, description, *, fns, methods,
            commutative=False, other_domain="real", x_domain="real", value_range=None):
    return Operator(
        name=name, category="elementwise_binary",
        slots=(Slot("input", ANY_RANK, domain=x_domain), Slot("other", ANY_RANK, domain=other_domain)),
        rule=broadcast_rule, torch_template=torch_template, triton_template=triton_template,
        description=description, torch_functions=fns, tensor_methods=methods,
        commutative=commutative, fresh=broadcast_fresh, value_range=value_range,
    )


def _gelu_torch(attrs):
    return "F.gelu({x})" if attrs.get("approximate", "none") == "none" else "F.gelu({x}, approximate={approximate})"


def _gelu_triton(attrs):
    if attrs.get("approximate", "none") == "none":
        return "0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"
    inner = "(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x}))"
    return f"0.5 * {{x}} * (1.0 + {tanh(inner)})"


def _softplus_triton(attrs):
    bx = "({beta} * {x})"
    return f"tl.where({bx} > {{threshold}}, {{x}}, {softplus(bx)} / {{beta}})"


def _pow_triton(attrs):
    exponent = attrs.get("exponent", 2)
    if float(exponent).is_integer() and 1 <= exponent <= 4:
        return " * ".join(["{x}"] * int(exponent))
    return "tl.exp({exponent} * tl.log({x}))"  # other exponents (traced programs): x > 0 only


# tl.maximum / tl.minimum on the GPU return the operand that is not NaN (PTX max.f32); PyTorch's
# relu, clamp and maximum return NaN: every bound below propagates it (the interpreter always did)
PROPAGATE_NAN = ", propagate_nan=tl.PropagateNan.ALL"


def _clamp_triton(low: str, high: str):
    """clamp/hardtanh; a bound that is None (``torch.clamp(x, min=0)``) is left out."""

    def template(attrs):
        expr = "{x}"
        if attrs.get(low) is not None:
            expr = f"tl.maximum({expr}, {{{low}}}{PROPAGATE_NAN})"
        if attrs.get(high) is not None:
            expr = f"tl.minimum({expr}, {{{high}}}{PROPAGATE_NAN})"
        return expr

    return template


def _add_scalar_torch(attrs):
    # x - c and x + (-c) are the same IEEE operation: render the natural spelling
    return "{x} + {value}" if attrs["value"] >= 0 else "{x} - " + repr(-attrs["value"])


_F = "torch.nn.functional."

UNARY = (
    _unary("relu", "torch.relu({x})", f"tl.maximum({{x}}, 0.0{PROPAGATE_NAN})", "max(x, 0)",
           fns=("torch.relu", _F + "relu"), methods=("relu",), modules=("torch.nn.ReLU",)),
    _unary("leaky_relu", "F.leaky_relu({x}, negative_slope={negative_slope})",
           "tl.where({x} > 0.0, {x}, {x} * {negative_slope})", "x if x > 0 else slope * x",
           attrs=(Choice("negative_slope", (0.01, 0.05, 0.1, 0.2)),),
           fns=(_F + "leaky_relu",), modules=("torch.nn.LeakyReLU",)),
    _unary("gelu", _gelu_torch, _gelu_triton, "Gaussian error linear unit (erf or tanh form)",
           attrs=(Choice("approximate", ("none", "tanh")),), fns=(_F + "gelu",),
           modules=("torch.nn.GELU",)),
    _unary("silu", "F.silu({x})", "{x} / (1.0 + tl.exp(-{x}))", "x * sigmoid(x) (swish)",
           fns=(_F + "silu",), modules=("torch.nn.SiLU",)),
    _unary("sigmoid", "torch.sigmoid({x})", sigmoid("{x}"), "1 / (1 + exp(-x))",
           fns=("torch.sigmoid", _F + "sigmoid"), methods=("sigmoid",),
           modules=("torch.nn.Sigmoid",)),
    _unary("tanh", "torch.tanh({x})", tanh("{x}"), "hyperbolic tangent",
           fns=("torch.tanh", _F + "tanh"), methods=("tanh",), modules=("torch.nn.Tanh",)),
    _unary("softplus", "F.softplus({x}, beta={beta}, threshold={threshold})", _softplus_triton,
           "log(1 + exp(beta x)) / beta, linear above the threshold",
           attrs=(Choice("beta", (0.5, 1.0, 2.0)), Choice("threshold", (20.0,))),
           fns=(_F + "softplus",), modules=("torch.nn.Softplus",)),
    _unary("mish", "F.mish({x})", "{x} * " + tanh(softplus("{x}")), "x * tanh(softplus(x))",
           fns=(_F + "mish",), modules=("torch.nn.Mish",)),
    _unary("hardswish", "F.hardswish({x})", f"{{x}} * tl.minimum(tl.maximum({{x}} + 3.0, 0.0{PROPAGATE_NAN}), 6.0{PROPAGATE_NAN}) / 6.0",
           "x * relu6(x + 3) / 6", fns=(_F + "hardswish",), modules=("torch.nn.Hardswish",)),
    _unary("hardsigmoid", "F.hardsigmoid({x})", f"tl.minimum(tl.maximum({{x}} + 3.0, 0.0{PROPAGATE_NAN}), 6.0{PROPAGATE_NAN}) / 6.0",
           "relu6(x + 3) / 6", fns=(_F + "hardsigmoid",), modules=("torch.nn.Hardsigmoid",)),
    _unary("elu", "F.elu({x}, alpha={alpha})", "tl.where({x} > 0.0, {x}, {alpha} * " + expm1("{x}") + ")",
           "x if x > 0 else alpha * (exp(x) - 1)", attrs=(Choice("alpha", (0.5, 1.0, 2.0)),),
           fns=(_F + "elu",), modules=("torch.nn.ELU",)),
    _unary("selu", "torch.selu({x})",
           f"{_SELU_SCALE!r} * tl.where({{x}} > 0.0, {{x}}, {_SELU_ALPHA!r} * {expm1('{x}')})",
           "scaled ELU with the self-normalising constants", fns=("torch.selu", _F + "selu"),
           modules=("torch.nn.SELU",)),
    _unary("hardtanh", "F.hardtanh({x}, min_val={min_val}, max_val={max_val})",
           _clamp_triton("min_val", "max_val"), "clamp to [min_val, max_val]",
           attrs=(Choice(("min_val", "max_val"), ((-1.0, 1.0), (-2.0, 2.0), (0.0, 1.0), (-0.5, 0.5))),),
           fns=(_F + "hardtanh",), modules=("torch.nn.Hardtanh",)),
    _unary("clamp", "torch.clamp({x}, min={min}, max={max})",
           _clamp_triton("min", "max"), "clamp to [min, max]",
           attrs=(Choice(("min", "max"), ((0.0, 1.0), (-1.0, 1.0), (-0.5, 2.0), (-2.0, 0.5))),),
           fns=("torch.clamp", "torch.clip"), methods=("clamp", "clip")),
    _unary("softsign", "F.softsign({x})", "{x} / (1.0 + tl.abs({x}))", "x / (1 + |x|)",
           fns=(_F + "softsign",), modules=("torch.nn.Softsign",)),
    _unary("abs", "torch.abs({x})", "tl.abs({x})", "|x|", fns=("torch.abs",),
           methods=("abs", "__abs__")),
    _unary("pow", "torch.pow({x}, {exponent})", _pow_triton, "x ** p for a small integer power",
           attrs=(Choice("exponent", (2, 3)),), fns=("torch.pow", "operator.pow"), methods=("pow", "__pow__")),
    _unary("add_scalar", _add_scalar_torch, "{x} + {value}", "x + c (also spelled x - c)",
           attrs=(Choice("value", (-1.0, -0.5, -0.1, 0.1, 0.5, 1.0, 2.0)),),
           fns=("operator.add", "operator.sub", "torch.add", "torch.sub", "torch.subtract"),
           methods=("add", "sub", "__add__", "__radd__", "__sub__")),
    _unary("mul_scalar", "{x} * {value}", "{x} * {value}", "x * c (scaling)",
           attrs=(Choice("value", (-1.0, 0.1, 0.5, 1.5, 2.0, 3.0)),),
           fns=("operator.mul", "torch.mul", "torch.multiply"), methods=("mul", "__mul__", "__rmul__")),
    _unary("div_scalar", "{x} / {value}", "{x} / {value}", "x / c",
           attrs=(Choice("value", (-2.0, 0.5, 1.5, 2.0, 3.0, 10.0)),),
           fns=("operator.truediv", "torch.div", "torch.divide"), methods=("div", "__truediv__")),
)

# Core ATen's elementwise math (what `torch.export` keeps of torch.exp, x.sqrt(), torch.where's
# arithmetic...): one record each, the Triton form built from the blocks above. Inputs outside
# a function's real domain (log of a negative) draw from the positive or unit domain.
_LN2, _LN10 = 0.6931471805599453, 2.302585092994046


def _math(name, triton_template, description, *, domain="real", torch_name=None, method=True, value_range=None,
          drawn=True):
    fn = torch_name or f"torch.{name}"
    return Operator(
        name=name, category="elementwise_unary", slots=(Slot("input", ANY_RANK, domain=domain),),
        rule=same_shape, torch_template=fn + "({x})", triton_template=triton_template,
        description=description, torch_functions=(fn,), tensor_methods=(name,) if method else (),
        value_range=value_range, drawn=drawn,
    )


# Periodic and discontinuous functions: sampling their template does not bound them
def _fixed(lo: float, hi: float):
    return lambda ranges, attrs: (lo, hi)


def _within_divisor(nonneg: bool):
    """fmod and remainder: |result| < |y| (remainder: on y's side)."""
    def rule(ranges, attrs):
        bound = max(abs(ranges[1][0]), abs(ranges[1][1]))
        return (0.0 if nonneg and ranges[1][0] >= 0 else -bound, bound)
    return rule


# floor(x) plus 1 above the half, plus floor(x) mod 2 at the half (x - floor(x) is exact)
_ROUND_HALF_EVEN = ("tl.where({x} - tl.floor({x}) > 0.5, tl.floor({x}) + 1.0, tl.where({x} - tl.floor({x}) < 0.5, "
                    "tl.floor({x}), tl.floor({x}) + tl.floor({x}) - 2.0 * tl.floor(tl.floor({x}) * 0.5)))")

MATH = (
    _math("neg", "-{x}", "-x"),
    _math("exp", "tl.exp({x})", "e ** x"),
    _math("exp2", f"tl.exp({{x}} * {_LN2!r})", "2 ** x"),
    _math("expm1", expm1("{x}"), "e ** x - 1, accurate near 0"),
    _math("log", "tl.log({x})", "natural logarithm (x > 0)", domain="positive"),
    _math("log2", f"tl.log({{x}}) * {1 / _LN2!r}", "base-2 logarithm (x > 0)", domain="positive"),
    _math("log10", f"tl.log({{x}}) * {1 / _LN10!r}", "base-10 logarithm (x > 0)", domain="positive"),
    _math("log1p", log1p_any("{x}"), "log(1 + x), accurate near 0 (x > -1)", domain="positive"),
    _math("sqrt", "tl.sqrt({x})", "square root (x >= 0)", domain="positive"),
    _math("rsqrt", "1.0 / tl.sqrt({x})", "1 / sqrt(x) (x > 0)", domain="positive"),
    _math("reciprocal", "1.0 / {x}", "1 / x", domain="positive"),
    _math("sin", "tl.sin({x})", "sine", value_range=_fixed(-1.0, 1.0)),
    _math("cos", "tl.cos({x})", "cosine", value_range=_fixed(-1.0, 1.0)),
    _math("tan", "tl.sin({x}) / tl.cos({x})", "tangent", value_range=_fixed(-math.inf, math.inf)),
    _math("asin", atan("({x} / tl.sqrt(1.0 - {x} * {x}))"), "arcsine (|x| < 1)", domain="unit"),
    _math("acos", "2.0 * " + atan("tl.sqrt((1.0 - {x}) / (1.0 + {x}))"), "arccosine (|x| < 1)", domain="unit"),
    _math("atan", atan("{x}"), "arctangent"),
    _math("sinh", sinh("{x}"), "hyperbolic sine"),
    _math("cosh", "0.5 * (tl.exp({x}) + tl.exp(-{x}))", "hyperbolic cosine"),
    _math("asinh", "tl.where({x} < 0.0, -1.0, 1.0) * "
          + log1p_any("(tl.abs({x}) + {x} * {x} / (1.0 + tl.sqrt(1.0 + {x} * {x})))"), "inverse hyperbolic sine"),
    _math("atanh", "tl.where({x} < 0.0, -0.5, 0.5) * " + log1p_any("(2.0 * tl.abs({x}) / (1.0 - tl.abs({x})))"),
          "inverse hyperbolic tangent (|x| < 1)", domain="unit"),
    _math("erf", "tl.erf({x})", "error function", torch_name="torch.erf"),
    _math("erfc", erfc("{x}"), "1 - erf(x), accurate in the tails", value_range=_fixed(0.0, 2.0)),
    # special functions (distributions' log-densities, the normal quantile): not drawn, as their
    # poles and unbounded ends have no glue into their domains
    _math("lgamma", lgamma("{x}"), "log |Gamma(x)|", domain="positive", drawn=False),
    _math("digamma", digamma("{x}"), "the derivative of lgamma", domain="positive", drawn=False),
    _math("erfinv", erfinv("{x}"), "inverse error function (|x| < 1)", domain="unit", drawn=False),
    _math("erfcx", erfcx("{x}"), "scaled complementary error function exp(x^2) erfc(x)",
          torch_name="torch.special.erfcx", method=False, drawn=False),
    _math("i0", bessel_i("{x}", 0, False), "modified Bessel function I0", drawn=False),
    _math("i0e", bessel_i("{x}", 0, True), "exponentially scaled I0, exp(-|x|) I0(x)",
          torch_name="torch.special.i0e", method=False, drawn=False),
    _math("i1", bessel_i("{x}", 1, False), "modified Bessel function I1", torch_name="torch.special.i1",
          method=False, drawn=False),
    _math("i1e", bessel_i("{x}", 1, True), "exponentially scaled I1, exp(-|x|) I1(x)",
          torch_name="torch.special.i1e", method=False, drawn=False),
    *(_math(f"bessel_{kind}{order}", (bessel_j if kind == "j" else bessel_y)("{x}", order),
            f"Bessel function of the {'first' if kind == 'j' else 'second'} kind, order {order}"
            + (" (x > 0)" if kind == "y" else ""), domain="positive" if kind == "y" else "real",
            torch_name=f"torch.special.bessel_{kind}{order}", method=False, drawn=False)
      for kind in "jy" for order in (0, 1)),
    *(_math(f"{'scaled_' if scaled else ''}modified_bessel_k{order}", bessel_k("{x}", order, scaled),
            f"{'exp(x) times the ' if scaled else ''}modified Bessel function K{order} (x > 0)", domain="positive",
            torch_name=f"torch.special.{'scaled_' if scaled else ''}modified_bessel_k{order}", method=False,
            drawn=False)
      for scaled in (False, True) for order in (0, 1)),
    _math("spherical_bessel_j0", spherical_bessel_j0("{x}"), "spherical Bessel function j0, sin(x) / x",
          torch_name="torch.special.spherical_bessel_j0", method=False, drawn=False),
    _math("ndtri", ndtri("{x}"), "the standard normal quantile (0 < x < 1)", domain="probability",
          torch_name="torch.special.ndtri", method=False, drawn=False),
    # log(x + sqrt(x^2 - 1)) as log1p of (x - 1) + sqrt((x - 1)(x + 1)): accurate near 1. Its
    # domain (x >= 1) has no glue into it: not drawn
    _math("acosh", log1p_any("(({x} - 1.0) + tl.sqrt(({x} - 1.0) * ({x} + 1.0)))"),
          "inverse hyperbolic cosine (x >= 1)", domain="above_one", drawn=False),
    _math("floor", "tl.floor({x})", "round down", drawn=False),
    _math("ceil", "tl.ceil({x})", "round up", drawn=False),
    _math("trunc", trunc("{x}"), "round toward zero", drawn=False),
    _math("round", _ROUND_HALF_EVEN, "round half to even", drawn=False),
    _math("frac", "{x} - " + trunc("{x}"), "x - trunc(x)", value_range=_fixed(-1.0, 1.0)),
    _math("sign", "tl.where({x} > 0.0, 1.0, tl.where({x} < 0.0, -1.0, 0.0))", "-1, 0 or 1", drawn=False),
    # a real number's argument: pi below 0, else 0; nan stays nan
    _math("angle", f"tl.where({{x}} < 0.0, {math.pi!r}, tl.where({{x}} == {{x}}, 0.0, {{x}}))",
          "the argument of a real number: pi below 0, else 0", value_range=_fixed(0.0, math.pi), drawn=False),
)

BINARY = (
    _binary("add", "{x} + {y}", "{x} + {y}", "x + y, broadcasting", commutative=True,
            fns=("operator.add", "torch.add"), methods=("add", "__add__", "__radd__")),
    _binary("sub", "{x} - {y}", "{x} - {y}", "x - y, broadcasting",
            fns=("operator.sub", "torch.sub", "torch.subtract"), methods=("sub", "__sub__")),
    _binary("mul", "{x} * {y}", "{x} * {y}", "x * y, broadcasting", commutative=True,
            fns=("operator.mul", "torch.mul", "torch.multiply"), methods=("mul", "__mul__", "__rmul__")),
    _binary("div", "{x} / {y}", "{x} / {y}", "x / y, broadcasting; y is kept away from zero",
            other_domain="positive", fns=("operator.truediv", "torch.div", "torch.divide"),
            methods=("div", "__truediv__")),
    _binary("maximum", "torch.maximum({x}, {y})", f"tl.maximum({{x}}, {{y}}{PROPAGATE_NAN})", "elementwise max",
            commutative=True, fns=("torch.maximum", "torch.max"), methods=("maximum",)),
    _binary("minimum", "torch.minimum({x}, {y})", f"tl.minimum({{x}}, {{y}}{PROPAGATE_NAN})", "elementwise min",
            commutative=True, fns=("torch.minimum", "torch.min"), methods=("minimum",)),
)

MORE_BINARY = (
    _binary("pow_tensor", "torch.pow({x}, {y})", "tl.exp({y} * tl.log({x}))", "x ** y for x > 0, broadcasting",
            fns=("torch.pow",), methods=("pow",), x_domain="positive"),
    _binary("atan2", "torch.atan2({x}, {y})",
            "tl.where({y} > 0.0, " + atan("({x} / {y})") + ", tl.where({y} < 0.0, "
            "tl.where({x} < 0.0, -1.0, 1.0) * 3.141592653589793 + " + atan("({x} / {y})") + ", "
            "tl.where({x} < 0.0, -1.5707963267948966, tl.where({x} > 0.0, 1.5707963267948966, 0.0))))",
            "atan(x / y) in the quadrant of the point (y, x), broadcasting", fns=("torch.atan2",), methods=("atan2",),
            value_range=_fixed(-math.pi, math.pi)),
    # Triton's % on floats is C's fmod (exact): torch.fmod; remainder moves it to y's sign
    _binary("fmod", "torch.fmod({x}, {y})", "{x} % {y}",
            "remainder of x / y rounded toward zero, broadcasting", other_domain="positive",
            fns=("torch.fmod",), methods=("fmod",), value_range=_within_divisor(nonneg=False)),
    _binary("remainder", "torch.remainder({x}, {y})", "tl.where(({x} % {y} != 0.0) & (({x} % {y} < 0.0) != ({y} < 0.0)), {x} % {y} + {y}, {x} % {y})",
            "remainder of x / y rounded down (Python's %), broadcasting", other_domain="positive",
            fns=("torch.remainder",), methods=("remainder",), value_range=_within_divisor(nonneg=True)),
    _binary("copysign", "torch.copysign({x}, {y})", "tl.where({y} < 0.0, -tl.abs({x}), tl.abs({x}))",
            "|x| with the sign of y, broadcasting", fns=("torch.copysign",), methods=("copysign",)),
    # NaN-ignoring max / min: the other operand where one is NaN
    _binary("fmax", "torch.fmax({x}, {y})", "tl.where({x} != {x}, {y}, tl.where({y} != {y}, {x}, tl.maximum({x}, {y})))",
            "elementwise max ignoring NaN, broadcasting", commutative=True, fns=("torch.fmax",), methods=("fmax",)),
    _binary("fmin", "torch.fmin({x}, {y})", "tl.where({x} != {x}, {y}, tl.where({y} != {y}, {x}, tl.minimum({x}, {y})))",
            "elementwise min ignoring NaN, broadcasting", commutative=True, fns=("torch.fmin",), methods=("fmin",)),
    _binary("hypot", "torch.hypot({x}, {y})", "tl.sqrt({x} * {x} + {y} * {y})", "sqrt(x^2 + y^2), broadcasting",
            commutative=True, fns=("torch.hypot",), methods=("hypot",)),
    _binary("logaddexp", "torch.logaddexp({x}, {y})",
            "tl.maximum({x}, {y}) + " + log1p("tl.exp(-tl.abs({x} - {y}))"), "log(e^x + e^y), broadcasting",
            commutative=True, fns=("torch.logaddexp",), methods=("logaddexp",)),
)

# prims.div on integers truncates toward zero: `i // 3`, torch.div(..., rounding_mode=...) and
# circular padding's index arithmetic lower to it (floor division adds a correction after). Triton's
# // on signed integers is C's truncating division; on floats, x / y truncated (as PyTorch's
# rounding_mode="trunc"). One helper for both dtypes: its branch is decided when it compiles.
_DIV_TRUNC = """@triton.jit
def _div_trunc(x, y):
    if x.dtype.is_floating():
        q = x / y
        return tl.where(q >= 0.0, tl.floor(q), tl.ceil(q))
    else:
        return x // y"""


def _quotient_range(ranges, attrs):
    """x / y over the boxes of x and y (y of one sign: its corners bound the quotient), then
    truncated, which is monotonic: the truncated corners bound it."""
    (xl, xh), (yl, yh) = ranges
    if yl <= 0.0 <= yh:
        return (-math.inf, math.inf)
    corners = [a / b for a in (xl, xh) for b in (yl, yh)]
    return tuple(math.trunc(c) if math.isfinite(c) else c for c in (min(corners), max(corners)))


MORE_BINARY += (
    dataclasses.replace(
        _binary("div_trunc", "torch.div({x}, {y}, rounding_mode='trunc')", "_div_trunc({x}, {y})",
                "x / y rounded toward zero (integers: exact), broadcasting", other_domain="positive",
                fns=("torch.div", "torch.divide"), methods=("div",), value_range=_quotient_range),
        triton_helpers=(_DIV_TRUNC,), drawn=False),
)

# Comparisons, logic, selection and casts: boolean (or retyped) results, as masks are made in
# real code (causal masks, padding masks, torch.where). Not drawn by synthesis: piecewise
# constant, and boolean-valued.
_BOOL_RANGE = (0.0, 1.0)
_TL_DTYPES = {"float32": "tl.float32", "float64": "tl.float64", "float16": "tl.float16", "bfloat16": "tl.bfloat16",
              "int64": "tl.int64", "int32": "tl.int32", "int16": "tl.int16", "int8": "tl.int8", "uint8": "tl.uint8",
              "bool": "tl.int1"}


def _logic(name, torch_template, triton_template, description, *, domains, fns=(), methods=(), out_dtype="bool",
           value_range=_fixed(*_BOOL_RANGE), attrs=()):
    slots = tuple(Slot(slot, ANY_RANK, domain=d) for slot, d in zip(("input", "other", "third"), domains))
    return Operator(
        name=name, category="elementwise_unary" if len(slots) == 1 else "elementwise_binary", slots=slots,
        rule=same_shape if len(slots) == 1 else broadcast_rule, torch_template=torch_template,
        triton_template=triton_template, description=description, torch_functions=fns, tensor_methods=methods,
        out_dtype=out_dtype, value_range=value_range, fresh=None if len(slots) == 1 else broadcast_fresh,
        attrs=attrs, drawn=False,
    )


def _compare(name, symbol, text):
    return _logic(name, f"{{x}} {symbol} {{y}}", f"{{x}} {symbol} {{y}}", f"x {text} y, broadcasting (booleans)",
                  domains=("real", "real"), fns=(f"torch.{name}",), methods=(name,))


# and/or as selects, xor as !=: the same on the GPU, and the Triton interpreter (3.7) gives a
# comparison's 0-d result the operands' float type, so `&` with it broadcast raises there
LOGIC = (
    _compare("eq", "==", "=="), _compare("ne", "!=", "!="), _compare("lt", "<", "<"),
    _compare("le", "<=", "<="), _compare("gt", ">", ">"), _compare("ge", ">=", ">="),
    _logic("logical_not", "torch.logical_not({x})", "{x} == 0", "not x (booleans)", domains=("mask",),
           fns=("torch.logical_not",), methods=("logical_not",)),
    _logic("logical_and", "torch.logical_and({x}, {y})", "tl.where({x} != 0, {y} != 0, False)", "x and y, broadcasting",
           domains=("mask", "mask"), fns=("torch.logical_and",), methods=("logical_and",)),
    _logic("logical_or", "torch.logical_or({x}, {y})", "tl.where({x} != 0, True, {y} != 0)", "x or y, broadcasting",
           domains=("mask", "mask"), fns=("torch.logical_or",), methods=("logical_or",)),
    _logic("logical_xor", "torch.logical_xor({x}, {y})", "({x} != 0) != ({y} != 0)", "x xor y, broadcasting",
           domains=("mask", "mask"), fns=("torch.logical_xor",), methods=("logical_xor",)),
    # the neighbouring float32 toward y: x's bits (as an int32) one step away from zero when y
    # lies beyond x, toward it otherwise; from 0 the smallest subnormal; NaN where either is
    _logic("nextafter", "torch.nextafter({x}, {y})",
           "tl.where(({x} != {x}) | ({y} != {y}), {x} + {y}, tl.where({x} == {y}, {y}, tl.where({x} == 0.0, "
           "tl.where({y} > 0.0, 1, -2147483647), {x}.to(tl.int32, bitcast=True) + tl.where(({x} > 0.0) == ({y} > {x}), "
           "1, -1)).to(tl.float32, bitcast=True)))",
           "the next float32 after x toward y, broadcasting (float32 only)", domains=("real", "real"),
           fns=("torch.nextafter",), methods=("nextafter",), out_dtype="float32",
           value_range=lambda ranges, attrs: ranges[0]),
    # -0.0 has its sign bit set too: 1 / -0.0 is -inf
    _logic("signbit", "torch.signbit({x})", "({x} < 0.0) | (({x} == 0.0) & (1.0 / {x} < 0.0))",
           "x's sign bit is set (negative, or -0.0)", domains=("real",), fns=("torch.signbit",), methods=("signbit",)),
    _logic("isnan", "torch.isnan({x})", "{x} != {x}", "x is NaN", domains=("real",), fns=("torch.isnan",),
           methods=("isnan",)),
    _logic("isinf", "torch.isinf({x})", "tl.abs({x}) == float('inf')", "x is +-infinity", domains=("real",),
           fns=("torch.isinf",), methods=("isinf",)),
    _logic("isfinite", "torch.isfinite({x})", "tl.abs({x}) < float('inf')", "x is neither infinite nor NaN",
           domains=("real",), fns=("torch.isfinite",), methods=("isfinite",)),
    _logic("where", "torch.where({x}, {y}, {z})", "tl.where({x} != 0, {y}, {z})",
           "y where the condition holds, else z, broadcasting", domains=("mask", "real", "real"),
           fns=("torch.where",), methods=("where",), out_dtype="float32",
           value_range=lambda r, attrs: (min(r[1][0], r[2][0]), max(r[1][1], r[2][1]))),
    _logic("to_dtype", lambda attrs: "{x}.to(torch.%s)" % attrs["dtype"],
           lambda attrs: "{x}.to(%s)" % _TL_DTYPES[attrs["dtype"]], "x converted to another dtype",
           domains=("real",), methods=("to", "float", "type_as"), out_dtype="float32",
           value_range=lambda r, attrs: r[0],
           attrs=(Choice("dtype", ("float32",)),)),
)


def _bitwise(name, symbol, text):
    return _logic(name, f"torch.{name}({{x}}, {{y}})", f"{{x}} {symbol} {{y}}", f"x {text} y bit by bit (integers), broadcasting",
                  domains=("integer", "integer"), fns=(f"torch.{name}",), methods=(name,), out_dtype="int64",
                  value_range=_bits_range)


def _bits_range(ranges, attrs):
    """Two's complement bits of operands within +-2^k stay within +-2^k."""
    top = max(max(abs(lo), abs(hi)) for lo, hi in ranges)
    bound = 2.0 ** math.ceil(math.log2(top + 1)) if math.isfinite(top) else math.inf
    return (-bound, bound)


# integer bits (reflection padding's parity, hashing); on booleans PyTorch's bitwise operators are
# the logical ones, and capture maps them there
BITWISE = (
    _bitwise("bitwise_and", "&", "and"), _bitwise("bitwise_or", "|", "or"), _bitwise("bitwise_xor", "^", "xor"),
    _logic("bitwise_not", "torch.bitwise_not({x})", "~{x}", "not x bit by bit (integers)", domains=("integer",),
           fns=("torch.bitwise_not",), methods=("bitwise_not",), out_dtype="int64", value_range=_bits_range),
)

OPERATORS = UNARY + MATH + BINARY + MORE_BINARY + LOGIC + BITWISE
