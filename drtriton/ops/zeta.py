"""The Hurwitz zeta function of torch.special and what stands on it: polygamma of order n >= 1.

zeta(x, q) = sum_k (k + q)^-x, as PyTorch computes it (Cephes' zeta, in float64 for float32
inputs): the sum's first terms until they stop counting (at least 9, and until k + q > 9), then
the Euler-Maclaurin tail with 12 Bernoulli terms. A loop, which one expression cannot hold: the
template calls a ``@triton.jit`` helper (``Operator.triton_helpers``, as the incomplete gamma
functions do). PyTorch's special values: inf at x = 1 or at q a non-positive integer, NaN for
x < 1 or for q < 0 with x not an integer (q^-x is not real).

polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 2; n = 1 is the trigamma function
(PyTorch's series with the reflection below 1/2); n = 0 is digamma, a record of its own (capture
maps polygamma(0, x) onto it).
"""

from __future__ import annotations

from drtriton.ops.elementwise import broadcast_fresh, broadcast_rule, same_shape
from drtriton.ops.operator import ANY_RANK, Choice, Operator, Slot

#: Cephes' Euler-Maclaurin denominators: (2k)! / B_2k
_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
      -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
      1.8152105401943546773e17, -7.1661652561756670113e18)
MACHEP = 1.11022302462515654042e-16

_tail = "\n".join(
    f"""    a = a * (x + k)
    b = b / w
    t = a * b / {c!r}
    s = tl.where(live, s + t, s)
    live = live & (tl.abs(t / s) >= {MACHEP!r})
    k = k + 1.0
    a = a * (x + k)
    b = b / w
    k = k + 1.0""" for c in _A)

_ZETA = f'''@triton.jit
def _zeta(x, q):
    # torch.special.zeta (Hurwitz): drtriton/ops/zeta.py
    x = x.to(tl.float64) + tl.zeros_like(q).to(tl.float64)
    q = q.to(tl.float64) + tl.zeros_like(x)
    odd = tl.abs(x - 2.0 * tl.floor(x / 2.0)) == 1.0
    # (k + q)^-x, a negative base only for an integer x (else NaN, below)
    a = q
    s = tl.where(a < 0.0, tl.where(odd, -1.0, 1.0), 1.0) * tl.exp(-x * tl.log(tl.abs(a)))
    b = tl.zeros_like(s)
    live = (x > 1.0) & (q == q) & ((q > 0.0) | (q != tl.floor(q)))
    i = 0
    while tl.max(tl.where(live & ((i < 9) | (a <= 9.0)), 1, 0), axis=0) > 0:
        step = live & ((i < 9) | (a <= 9.0))
        a = tl.where(step, a + 1.0, a)
        b = tl.where(step, tl.where(a < 0.0, tl.where(odd, -1.0, 1.0), 1.0) * tl.exp(-x * tl.log(tl.abs(a))), b)
        s = tl.where(step, s + b, s)
        live = live & ~(step & (-{MACHEP!r} * s < b) & (b < {MACHEP!r} * s))
        i += 1
    # the Euler-Maclaurin tail where the sum has not converged
    w = a
    s = tl.where(live, s + b * w / (x - 1.0) - 0.5 * b, s)
    a = tl.zeros_like(s) + 1.0
    k = tl.zeros_like(s)
{_tail}
    s = tl.where(x == 1.0, float("inf"), s)
    s = tl.where(x < 1.0, float("nan"), s)
    s = tl.where((q <= 0.0) & (q == tl.floor(q)) & (x >= 1.0), float("inf"), s)
    s = tl.where((q < 0.0) & (q != tl.floor(q)) & (x != tl.floor(x)) & (x > 1.0), float("nan"), s)
    return s'''

_POLYGAMMA = '''@triton.jit
def _polygamma(x, n: tl.constexpr):
    # torch.polygamma(n, x), n >= 1: drtriton/ops/zeta.py
    x = x.to(tl.float64)
    if n == 1:
        # trigamma: the reflection below 1/2, six steps up, then the asymptotic series
        pi = 3.141592653589793
        below = x < 0.5
        # sin(pi x)^2 from x's distance to the nearest integer (exact): near a pole pi x itself
        # would carry more rounding than the distance
        sin_pi_x = tl.sin(pi * (x - tl.floor(x + 0.5)))
        result = tl.where(below, -(pi * pi) / (sin_pi_x * sin_pi_x), 0.0)
        y = tl.where(below, 1.0 - x, x)
        for _ in tl.static_range(6):
            result += 1.0 / (y * y)
            y += 1.0
        ixx = 1.0 / (y * y)
        result += (1.0 + 1.0 / (2.0 * y) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / y
        out = tl.where(below, -result, result)
    else:
        factorial = 1.0
        for j in tl.static_range(2, n + 1):
            factorial *= j
        if n % 2 == 0:
            factorial = -factorial
        out = factorial * _zeta(tl.zeros_like(x) + (n + 1.0), x)
    return out'''

OPERATORS = (
    Operator(
        name="zeta", category="elementwise_binary",
        slots=(Slot("input", ANY_RANK, domain="above_one"), Slot("other", ANY_RANK, domain="positive")),
        rule=broadcast_rule, torch_template="torch.special.zeta({x}, {y})",
        triton_template="_zeta({x}, {y}).to({x}.dtype)", triton_helpers=(_ZETA,),
        description="Hurwitz zeta: the sum over k of (k + q)^-x, broadcasting",
        torch_functions=("torch.special.zeta",), fresh=broadcast_fresh, drawn=False,
        value_range=lambda ranges, attrs: (0.0, float("inf")),  # x > 1, q > 0: positive, unbounded near q = 0
    ),
    Operator(
        name="polygamma", category="elementwise_unary", slots=(Slot("input", ANY_RANK, domain="positive"),),
        rule=same_shape, torch_template="torch.polygamma({n}, {x})",
        triton_template="_polygamma({x}, {n}).to({x}.dtype)", triton_helpers=(_POLYGAMMA, _ZETA),
        description="the n-th derivative of digamma (n >= 1)", attrs=(Choice("n", (1, 2, 3, 4)),),
        torch_functions=("torch.polygamma", "torch.special.polygamma"), tensor_methods=("polygamma",), drawn=False,
        value_range=lambda ranges, attrs: (-float("inf"), float("inf")),  # poles at 0, -1, ...
    ),
)
