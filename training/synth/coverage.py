"""Coverage statistics of a program set: operator histogram, uniformity, pairs seen together."""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations_with_replacement
from typing import Iterable, Sequence


def histogram(op_lists: Iterable[Sequence[str]]) -> Counter:
    counts: Counter = Counter()
    for ops in op_lists:
        counts.update(ops)
    return counts


def _gamma_q(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x) (series / continued fraction)."""
    if x <= 0:
        return 1.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    b, c, d = x + 1 - a, 1e300, 1 / (x + 1 - a)
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1 / (d if abs(d) > 1e-300 else 1e-300)
        c = b + an / c if abs(b + an / c) > 1e-300 else 1e-300
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(log_front) * h


def chi_square_uniform(counts: Sequence[int]) -> tuple[float, int, float]:
    """Pearson's chi-square test of ``counts`` against a uniform distribution:
    (statistic, degrees of freedom, p-value)."""
    total, cells = sum(counts), len(counts)
    if cells < 2 or total == 0:
        return 0.0, max(cells - 1, 0), 1.0
    expected = total / cells
    stat = sum((c - expected) ** 2 / expected for c in counts)
    dof = cells - 1
    return stat, dof, _gamma_q(dof / 2, stat / 2)


def pairs_seen(op_lists: Iterable[Sequence[str]]) -> set[tuple[str, str]]:
    """Unordered operator pairs (a == b allowed) that appear in a common program."""
    seen: set[tuple[str, str]] = set()
    for ops in op_lists:
        counts = Counter(ops)
        seen.update(pair for pair in combinations_with_replacement(sorted(counts), 2)
                    if pair[0] != pair[1] or counts[pair[0]] > 1)
    return seen


def all_pairs(names: Sequence[str]) -> set[tuple[str, str]]:
    return set(combinations_with_replacement(sorted(names), 2))
