"""The regularized incomplete gamma functions of torch.special: igamma P(a, x) (lower) and igammac
Q(a, x) = 1 - P (upper), elementwise in (a, x), broadcasting.

Both are sums a loop evaluates, which one expression cannot hold: each record's template calls a
``@triton.jit`` helper (``Operator.triton_helpers``, as the orthogonal polynomials do). Computed
in float64, as PyTorch's float32 kernel is accurate to its own precision: the series
P = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1)...(a + n)) where x < a + 1, and Legendre's
continued fraction for Q elsewhere (modified Lentz), each until every element of the block it
decides has converged (at most MAX_TERMS). The other function is 1 minus the one computed.
PyTorch's special values first: NaN for a negative a or x (and for a = x = 0), P = 1 where
a = 0 < x, P = 0 where x = 0, NaN where both are infinite, P = 0 for an infinite a, P = 1 for an
infinite x.
"""

from __future__ import annotations

from drtriton.ops.elementwise import broadcast_fresh, broadcast_rule, lgamma
from drtriton.ops.operator import ANY_RANK, Operator, Slot

#: the most terms either loop takes: each runs until every element of the block it decides has
#: converged (a few times sqrt(a), or sqrt(x), terms: about 3,000 for a and x near 1e5)
MAX_TERMS = 100_000

_SOURCE = f'''@triton.jit
def _igamma_pq(a, x, upper: tl.constexpr):
    # torch.special.igamma (P) or igammac (Q, upper): drtriton/ops/incomplete_gamma.py
    a = a.to(tl.float64) + tl.zeros_like(x).to(tl.float64)
    x = x.to(tl.float64) + tl.zeros_like(a)
    ok = (a > 0.0) & (x > 0.0) & (a < float("inf")) & (x < float("inf"))
    aa = tl.where(ok, a, 1.0)
    xx = tl.where(ok, x, 1.0)
    by_series = xx < aa + 1.0
    front = tl.exp(aa * tl.log(xx) - xx - ({lgamma("aa")}))
    # the series for P (x < a + 1), until its terms stop counting
    term = 1.0 / aa
    total = term
    n = 1
    while (n < {MAX_TERMS}) & (tl.max(tl.where(by_series, tl.abs(term) / total, 0.0), axis=0) > 1.0e-16):
        term = tl.where(by_series, term * xx / (aa + n), 0.0)
        total = total + term
        n += 1
    series = front * total
    # the continued fraction for Q (x >= a + 1), modified Lentz, until its factors are 1
    tiny = 1.0e-300
    b = xx + 1.0 - aa
    c = tl.zeros_like(b) + 1.0 / tiny
    d = 1.0 / tl.where(tl.abs(b) < tiny, tiny, b)
    h = d
    step = tl.zeros_like(b)
    i = 1
    while (i < {MAX_TERMS}) & (tl.max(tl.where(by_series, 0.0, tl.abs(step - 1.0)), axis=0) > 1.0e-14):
        an = -i * (i - aa)
        b = b + 2.0
        d = an * d + b
        d = 1.0 / tl.where(tl.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = tl.where(tl.abs(c) < tiny, tiny, c)
        step = d * c
        h = h * step
        i += 1
    fraction = front * h
    p = tl.where(by_series, series, 1.0 - fraction)
    q = tl.where(by_series, 1.0 - series, fraction)
    # PyTorch's special values (the first that holds wins); `one` is P = 1 (Q = 0)
    if upper:
        out = q
        one = 0.0
        zero = 1.0
    else:
        out = p
        one = 1.0
        zero = 0.0
    out = tl.where(x == float("inf"), one, out)
    out = tl.where(a == float("inf"), tl.where(x == float("inf"), float("nan"), zero), out)
    out = tl.where(x == 0.0, zero, out)
    out = tl.where(a == 0.0, tl.where(x > 0.0, one, float("nan")), out)
    out = tl.where((a < 0.0) | (x < 0.0) | (a != a) | (x != x), float("nan"), out)
    return out'''


def _record(name: str, special: str, upper: bool, description: str) -> Operator:
    return Operator(
        name=name, category="elementwise_binary",
        slots=(Slot("input", ANY_RANK, domain="positive"), Slot("other", ANY_RANK, domain="positive")),
        rule=broadcast_rule, torch_template=f"torch.{name}({{x}}, {{y}})",
        triton_template=f"_igamma_pq({{x}}, {{y}}, {upper}).to({{x}}.dtype)", triton_helpers=(_SOURCE,),
        description=description, torch_functions=(f"torch.{name}", f"torch.special.{special}"),
        tensor_methods=(name,), fresh=broadcast_fresh, value_range=lambda ranges, attrs: (0.0, 1.0), drawn=False,
    )


OPERATORS = (
    _record("igamma", "gammainc", False, "regularized lower incomplete gamma P(a, x), broadcasting"),
    _record("igammac", "gammaincc", True, "regularized upper incomplete gamma Q(a, x) = 1 - P(a, x), broadcasting"),
)
