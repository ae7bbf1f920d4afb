"""Values computed from the input shapes alone, made once per shape (drtriton/policy/per_shape.py,
issue 17): masks and positions built from sizes run on a call with a new key only; what forward
returns, what a kernel writes into and what is random stays computed every call. Each module
here runs elementwise kernels only, under the Triton interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import capture, first_candidate, source  # noqa: E402
from test_recompute import _load  # noqa: E402

from drtriton.policy import per_shape  # noqa: E402
from drtriton.policy.program import Program  # noqa: E402

# a bias from the batch size (the dim that takes other sizes), added to scores: the same every
# call with that batch (a softmax: its own kernel, where comparisons alone would be computed
# inside the add's)
BIAS = ("s + torch.arange(s.shape[0], device=s.device).float().softmax(0)[:, None]", "torch.randn(4, 6)", "s")


def _module(src: str, tmp_path, monkeypatch):
    """(the first strict candidate, its ModelNew), for elementwise kernels only (in this process)."""
    _, cand = first_candidate(src)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # (read as the kernels are defined)
    return cand, _load(cand.source, tmp_path).ModelNew()


# Calls the candidate in tmp_path at each batch size of argv[2:], printing per call the launches,
# whether it matched `want` and how many keys the module keeps. In a process of its own: the
# softmax's kernel calls tl.zeros, which the interpreter patches only where Triton was first
# imported under it.
_CALLS = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1] + "/candidate.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
count = [0]
class Counting:
    def __init__(self, launcher): self.launcher = launcher
    def __getitem__(self, grid):
        count[0] += 1
        return self.launcher[grid]
for name, value in list(vars(mod).items()):
    if type(value).__name__ == "_DirectLaunch":
        setattr(mod, name, Counting(value))
model = mod.ModelNew()
for batch in map(int, sys.argv[2:]):
    s = torch.randn(batch, 6)
    count[0] = 0
    with torch.no_grad():
        got = model(s)
    ok = torch.allclose(got, s + torch.arange(batch).float().softmax(0)[:, None], atol=1e-6)
    print(count[0], ok, len(model._per_shape_values))
"""


def test_a_bias_is_made_once_per_batch_size_and_its_kernels_skipped_after(tmp_path):
    _, cand = first_candidate(source(*BIAS))
    assert any("once per input shape" in line for line in cand.plan), cand.plan
    assert "_shaped = _kept.get(_key)" in cand.source
    (tmp_path / "candidate.py").write_text(cand.source)
    proc = subprocess.run([sys.executable, "-c", _CALLS, str(tmp_path), "4", "4", "7", "4", "7"],
                          capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = [line.split() for line in proc.stdout.splitlines()]
    assert [ok for _, ok, _ in calls] == ["True"] * 5, proc.stdout
    launches = [int(n) for n, _, _ in calls]
    # a new batch size computes the bias (the softmax and the add); one seen before only adds
    assert launches[0] == launches[2] > launches[1] == launches[3] == launches[4] > 0, launches
    assert [int(k) for _, _, k in calls] == [1, 1, 2, 2, 2]


def test_what_forward_returns_is_made_every_call(tmp_path, monkeypatch):
    # the positions are an output: a caller changing them must not change the next call's
    src = source("(x * 2, torch.arange(x.shape[0], device=x.device).float() + 1)", "torch.randn(5)")
    problem, graph, _ = capture(src)
    program = Program(graph)
    assert not per_shape.shape_only(program) & program.roots
    _, model = _module(src, tmp_path, monkeypatch)
    _, pos = model(torch.randn(5))
    pos.zero_()
    torch.testing.assert_close(model(torch.randn(5))[1], torch.arange(5).float() + 1)


def test_random_values_are_never_kept(tmp_path, monkeypatch):
    # noise drawn from the shape alone: drawn anew every call, never once per shape
    src = source("x + torch.rand(x.shape, device=x.device)", "torch.randn(4, 3)")
    _, cand = first_candidate(src, mode="mixed")
    assert "_shaped" not in cand.source and "once per input shape" not in cand.description, cand.description
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    x = torch.zeros(4, 3)
    assert not torch.equal(model(x), model(x))


def test_a_fresh_tensor_a_scatter_writes_into_is_made_every_call(tmp_path, monkeypatch):
    # zeros(n) written in place by the scatter: kept, the second call would add to the first's sums
    src = source("torch.zeros(x.shape[0] // 2, device=x.device).index_add(0, torch.arange(x.shape[0], "
                 "device=x.device) // 2, x)", "torch.randn(8)")
    _, model = _module(src, tmp_path, monkeypatch)
    for _ in range(2):
        x = torch.randn(8)
        torch.testing.assert_close(model(x), x.view(4, 2).sum(1))


def test_keep_holds_the_last_eight_keys():
    kept = {}
    for k in range(10):
        per_shape.keep(kept, k, (k,))
    assert list(kept) == list(range(2, 10))


def test_a_module_without_such_values_is_unchanged():
    _, cand = first_candidate(source("torch.relu(x) * 2", "torch.randn(4, 3)"))
    assert "_per_shape" not in cand.source and "once per input shape" not in cand.description


def test_the_verifier_judges_such_a_module_as_it_runs_after_its_first_call_per_shape(cpu_verifier):
    # the first call with a shape launches the bias's kernels too: the verifier judges it, then
    # compares the later calls' launches with a second call's on the same inputs (before, it
    # rejected the module for launches that changed between calls)
    problem, cand = first_candidate(source(*BIAS))
    assert any("once per input shape" in line for line in cand.plan), cand.plan
    verdict = cpu_verifier.verify(problem, cand.source, mode="strict")
    assert verdict.correct, verdict.summary
    assert verdict.triton_kernels == ["add_kernel"], verdict.triton_kernels


def test_kept_names_follow_the_blocks_in_order():
    # `_n` set by a plain block, set again by a hoisted one, then read by a plain block without
    # being set: on a hit the hoisted value must come from what was kept; `_m`, set again before
    # it is read, and `x`, never set by a hoisted block, need not be
    blocks = [(["_n = x.numel()", "_m = 1"], False),
              (["mask = torch.ones(_n)", "_n = mask.numel()", "_m = 2"], True),
              (["_m = 3", "y = x * mask + _n + _m"], False)]
    assert per_shape._kept_names(blocks) == ["_n", "mask"]
