"""Target sizes: where the solver's randomised search starts for each free integer.

Sizes are drawn log-uniformly from a table of "natural" sizes (every size up to 16, then
multiples of 1, 1.25, 1.5 and 1.75 times a power of two, and odd neighbours 2^j - 1, 2^j + 1
that exercise boundary masks), so small and large programs are equally likely and shapes look
like the ones people write.
"""

from __future__ import annotations

import bisect
import random
from functools import lru_cache


@lru_cache(maxsize=None)
def table(limit: int) -> tuple[int, ...]:
    sizes = set(range(1, 17))
    power = 16
    while power <= limit:
        sizes.update(power * m // 8 for m in (8, 10, 12, 14))
        sizes.update((power - 1, power + 1))
        power *= 2
    return tuple(sorted(s for s in sizes if s <= limit))


def target(rng: random.Random, lo: int, hi: int, dist: str = "log") -> int:
    """A target value in [lo, hi]: uniform, or log-uniform over the size table."""
    if dist == "uniform" or hi - lo < 4:
        return rng.randint(lo, hi)
    sizes = table(max(hi, 16))
    start, stop = bisect.bisect_left(sizes, lo), bisect.bisect_right(sizes, hi)
    if start >= stop:
        return rng.randint(lo, hi)
    return sizes[rng.randrange(start, stop)]

