"""Coverage: operators are drawn uniformly at every k and pairs of operators can co-occur."""

from __future__ import annotations

import random
import warnings

import pytest

pytest.importorskip("ortools")

from drtriton import ops  # noqa: E402
from drtriton.training.synth import coverage  # noqa: E402
from drtriton.training.synth.config import Bounds  # noqa: E402
from drtriton.training.synth.generate import make_program  # noqa: E402

BOUNDS = Bounds.make(min_flops=1_000, max_flops=200_000)
#: draws per k: about 20 per operator
DRAWS = 20 * len(ops.SYNTH_NAMES)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_operator_frequencies_are_uniform(k):
    """Chi-square against uniform over the vocabulary (sized programs, no execution gate: it
    refuses wirings, not operator sequences)."""
    programs = [make_program(21, k, i, BOUNDS, check=False).program for i in range(DRAWS // k)]
    assert sum(p is None for p in programs) <= len(programs) // 100
    counts = coverage.histogram(p.ops for p in programs if p is not None)
    stat, dof, p_value = coverage.chi_square_uniform([counts[name] for name in ops.SYNTH_NAMES])
    assert dof == len(ops.SYNTH_NAMES) - 1
    assert p_value > 0.001, (stat, counts.most_common(5), counts.most_common()[-5:])
    assert set(counts) == set(ops.SYNTH_NAMES)


def test_chi_square_detects_a_skew():
    """The statistic is not vacuous at this sample size: four operators at a quarter of their rate
    are rejected (and an operator never drawn also fails the ``set(counts)`` check above)."""
    rng = random.Random(0)
    names = list(ops.SYNTH_NAMES)
    draws = [rng.choice(names) for _ in range(DRAWS)]
    rare = {"relu", "conv2d", "sum", "mse_loss"}
    skewed = [n for n in draws if n not in rare or rng.random() < 0.25]
    counts = coverage.histogram([skewed])
    assert coverage.chi_square_uniform([counts[n] for n in names])[2] < 1e-4
    counts = coverage.histogram([draws])  # truly uniform draws: p is itself uniform, so p < 1e-4 1 time in 10^4
    assert coverage.chi_square_uniform([counts[n] for n in names])[2] > 1e-4


def test_pairs_of_operators_can_appear_together():
    """A deterministic sample of ordered pairs; scripts/synth_pairs.py sweeps all of them
    (4484 of 4489 at the default bounds). A few pairs are rare or impossible by nature:
    ``relu`` of a ``log_softmax`` is always 0, 3-D pooling after a reduction needs the reduced
    axes to avoid the three pooled ones."""
    rng = random.Random(1)
    pairs = [(rng.choice(ops.SYNTH_NAMES), rng.choice(ops.SYNTH_NAMES)) for _ in range(150)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failed = [pair for i, pair in enumerate(pairs)
                  if make_program(2, 2, i, BOUNDS, names=list(pair)).program is None]
    assert len(failed) <= len(pairs) // 50, failed


def test_pairs_seen_counts_co_occurrence():
    seen = coverage.pairs_seen([["relu", "add"], ["add", "add", "sum"], ["relu"]])
    assert seen == {("add", "relu"), ("add", "add"), ("add", "sum")}
    assert len(coverage.all_pairs(["a", "b", "c"])) == 6
