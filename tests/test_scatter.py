"""The store side of indexing (drtriton/policy/emit/scatter.py), end to end on the CPU: capture ->
BuiltinPolicy candidates (strict mode unless said) -> the first candidate verified by the Verifier
under the Triton interpreter, against PyTorch. Indices repeat (atomics must add every element),
count from the end where PyTorch allows it, and the batch of the inputs changes where the
verifier can change it (its second input configuration)."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from drtriton.policy.builtin import BuiltinPolicy  # noqa: E402
from drtriton.policy.emit import Names, Unsupported, scatter  # noqa: E402
from drtriton.policy.program import Program  # noqa: E402
from test_policy_pool_scan_loss import capture, source  # noqa: E402


def check(verifier, src: str, triton: list[str], mode: str = "strict", second: bool = True):
    """The first candidate is correct, runs the named fragments in Triton and, with `second`,
    was also checked on the verifier's other batch size."""
    problem, graph, _ = capture(src)
    cand = next(iter(BuiltinPolicy("cpu").candidates(problem, graph, mode)), None)
    assert cand is not None, f"no {mode} candidate"
    for label in triton:
        assert any(line.startswith(label + ":") and "Triton" in line for line in cand.plan), (label, cand.plan)
    verdict = verifier.verify(problem, cand.source, mode=mode)
    assert verdict.correct, f"{cand.description}: {verdict.summary}"
    if second:
        assert len(verdict.shapes_checked) == 2, verdict.flags
    return cand


# x (6, 8), index and src (6, 12): index values past 6, so the verifier halves the batch too
SCATTER_INPUTS = "torch.randn(6, 8), torch.randint(0, 8, (6, 12)), torch.randn(6, 12)"


def test_scatter_stores_each_element(cpu_verifier):
    """Plain scatter with distinct positions per row (a permutation), src larger than the index."""
    check(cpu_verifier, source("torch.scatter(x, 1, i, s)",
                               "torch.randn(6, 8), torch.rand(6, 8).argsort(1)[:, :5], torch.randn(6, 7)",
                               "x, i, s"), ["scatter"])


def test_scatter_of_a_number(cpu_verifier):
    check(cpu_verifier, source("torch.scatter(x, 1, i, 2.5)", "torch.randn(6, 8), torch.rand(6, 8).argsort(1)[:, :5]",
                               "x, i"), ["scatter"])


def test_scatter_add_with_repeated_indices(cpu_verifier):
    """12 elements a row into 8 places: indices repeat, and every element must count."""
    cand = check(cpu_verifier, source("torch.scatter_add(x, 1, i, s)", SCATTER_INPUTS, "x, i, s"), ["scatter"])
    assert "tl.atomic_add" in cand.source


@pytest.mark.parametrize("reduce,include_self", [("sum", False), ("mean", True), ("mean", False), ("amax", True),
                                                 ("amax", False), ("amin", False)])
def test_scatter_reduce(cpu_verifier, reduce, include_self):
    check(cpu_verifier, source(f"torch.scatter_reduce(x, 1, i, s, {reduce!r}, include_self={include_self})",
                               SCATTER_INPUTS, "x, i, s"), ["scatter"])


def test_integer_scatter_reduce(cpu_verifier):
    """Integers compare exactly: amax without the input's values starts from the dtype's minimum."""
    check(cpu_verifier, source("torch.scatter_reduce(x, 1, i, s, 'amax', include_self=False) + "
                               "torch.scatter_add(x, 1, i, s)",
                               "torch.randint(-50, 50, (6, 8)), torch.randint(0, 8, (6, 12)), "
                               "torch.randint(-50, 50, (6, 12))", "x, i, s"), ["scatter"])


def test_scatter_of_a_size(cpu_verifier):
    """A number forward computes from the inputs' sizes is an argument, not a constant: the
    second batch size stores another value."""
    check(cpu_verifier, source("torch.scatter(x, 1, i, x.shape[0] * 1.5)",
                               "torch.randn(6, 8), torch.rand(6, 8).argsort(1)[:, :5]", "x, i"), ["scatter"])


def test_index_put_accumulates_repeated_negative_indices(cpu_verifier):
    """x[i, j] += v with two broadcast index tensors, negative positions among them."""
    check(cpu_verifier, source("torch.index_put(x, (i, j), v, accumulate=True)",
                               "torch.randn(5, 7), torch.randint(-5, 5, (9, 1)), torch.randint(-7, 7, (1, 4)), "
                               "torch.randn(9, 4)", "x, i, j, v"), ["index_put"], second=False)


def test_index_put_on_a_middle_axis(cpu_verifier):
    """x[rows, i] = v: an arange of rows broadcast against negative column positions."""
    check(cpu_verifier, source("torch.index_put(x, (torch.arange(x.shape[0])[:, None], i), v)",
                               "torch.randn(6, 9), torch.randperm(9)[:4] - 9, torch.randn(6, 4)", "x, i, v"),
          ["index_put"])


def test_index_put_values_broadcast_through_their_strides(cpu_verifier):
    """x[i, :] = v with v a row (or a column of one) broadcast over the positions: passed with its
    own strides after a check of its shape, no expand in forward."""
    cand = check(cpu_verifier, source("torch.index_put(x, (i,), v)", "torch.randn(7, 5), torch.randperm(7)[:3], "
                                      "torch.randn(5)", "x, i, v"), ["index_put"], second=False)
    assert ".expand(" not in cand.source and "v has shape" in cand.source
    check(cpu_verifier, source("torch.index_put(x, (i,), v, accumulate=True)", "torch.randn(7, 5), "
                               "torch.randint(-7, 7, (4,)), torch.randn(4, 1)", "x, i, v"), ["index_put"], second=False)


@pytest.mark.parametrize("expr,inputs,args", [
    ("torch.index_add(x, 1, i, s, alpha=2.0)", "torch.randn(6, 8), torch.randint(0, 8, (10,)), torch.randn(6, 10)",
     "x, i, s"),
    ("torch.index_copy(x, 1, i, s)", "torch.randn(6, 8), torch.randperm(8)[:5], torch.randn(6, 5)", "x, i, s"),
    ("x.index_fill(1, i, -1.5)", "torch.randn(6, 8), torch.randint(0, 8, (5,))", "x, i"),
    ("torch.index_reduce(x, 1, i, s, 'amax', include_self=False)",
     "torch.randn(6, 8), torch.randint(0, 8, (10,)), torch.randn(6, 10)", "x, i, s"),
    ("torch.index_reduce(x, 1, i, s, 'mean')", "torch.randn(6, 8), torch.randint(0, 8, (10,)), torch.randn(6, 10)",
     "x, i, s"),
])
def test_lowered_to_scatter_or_index_put(cpu_verifier, expr, inputs, args):
    check(cpu_verifier, source(expr, inputs, args), [])


def test_put_and_masked_scatter(cpu_verifier):
    check(cpu_verifier, source("torch.put(x, i, s, accumulate=True)",
                               "torch.randn(6, 8), torch.randint(-48, 48, (30,)), torch.randn(30)", "x, i, s"),
          ["index_put"], second=False)
    check(cpu_verifier, source("torch.masked_scatter(x, m, s)", "torch.randn(6, 8), torch.rand(6, 8) > 0.5, "
                               "torch.randn(6, 8)", "x, m, s"), [])
    # an empty source (and a mask selecting nothing): nothing is read from it, no position -1
    check(cpu_verifier, source("torch.masked_scatter(x, m, s) * 2.0", "torch.randn(6, 8), torch.zeros(6, 8, "
                               "dtype=torch.bool), torch.randn(0)", "x, m, s"), [])


def test_scatter_among_elementwise_ops(cpu_verifier):
    """Elementwise ops before (their own kernels) and after the scatter: the epilogue fused into the
    scatter's last pass."""
    cand = check(cpu_verifier, source("torch.relu(torch.scatter_add(x * 2.0, 1, i, torch.sigmoid(s))) - x",
                                      SCATTER_INPUTS, "x, i, s"), ["scatter, relu, sub"])
    assert "finish" in cand.source
    check(cpu_verifier, source("torch.tanh(torch.scatter_reduce(x, 1, i, s, 'mean')) * 3.0",
                               SCATTER_INPUTS, "x, i, s"), ["scatter, tanh, mul_scalar"])


def test_what_has_no_atomic_stays_pytorch(cpu_verifier):
    """prod (no atomic multiply) is Unsupported in strict mode; mixed mode keeps it in PyTorch and
    the rest in Triton."""
    expr = "torch.relu(torch.scatter_reduce(x, 1, i, s, 'prod'))"
    problem, graph, _ = capture(source(expr, SCATTER_INPUTS, "x, i, s"))
    assert next(iter(BuiltinPolicy("cpu").candidates(problem, graph, "strict")), None) is None
    cand = check(cpu_verifier, source(expr, SCATTER_INPUTS, "x, i, s"), ["relu"], mode="mixed", second=False)
    assert any("atomic multiply" in note for note in cand.notes), cand.notes


def _anchor(expr: str, inputs: str, args: str):
    problem, graph, _ = capture(source(expr, inputs, args))
    program = Program(graph)
    frag = next(f for f in program.fragments() if f.anchor is not None and f.anchor.op in ("scatter", "index_put"))
    return program, frag


def test_unsupported_dtypes_are_said():
    program, frag = _anchor("torch.scatter_reduce(x, 1, i, s, 'amax')",
                            "torch.randn(6, 8).half(), torch.randint(0, 8, (6, 12)), torch.randn(6, 12).half()",
                            "x, i, s")
    with pytest.raises(Unsupported, match="atomic_max for torch.float16"):
        scatter.emit(program, frag, {}, Names(), device="cpu")
    program, frag = _anchor("torch.scatter_reduce(x, 1, i, s, 'mean')",
                            "torch.randint(0, 9, (6, 8)), torch.randint(0, 8, (6, 12)), torch.randint(0, 9, (6, 12))",
                            "x, i, s")
    with pytest.raises(Unsupported, match="integer scatter mean"):
        scatter.emit(program, frag, {}, Names(), device="cpu")


def test_fresh_allocation_is_written_in_place():
    """zeros(...).index_put_(...) (max_unpool, EmbeddingBag): no copy of the zeros; an input is
    never written."""
    program, frag = _anchor("torch.zeros(4, 5).index_put((i,), v, accumulate=True)",
                            "torch.randint(0, 4, (7,)), torch.randn(7, 5)", "i, v")
    emitted = scatter.emit(program, frag, {}, Names(), device="cpu")
    assert not any("copy" in k.splitlines()[1] for k in emitted.kernels) and len(emitted.kernels) == 1
    program, frag = _anchor("torch.index_put(x, (i,), v, accumulate=True)",
                            "torch.zeros(4, 5), torch.randint(0, 4, (7,)), torch.randn(7, 5)", "x, i, v")
    assert len(scatter.emit(program, frag, {}, Names(), device="cpu").kernels) == 2
