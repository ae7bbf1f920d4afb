"""Branches on tensor values and forward's own assertions become checks the converted module
runs (`drtriton.capture.Check`): a module that validates its inputs (`if torch.any(var < 0):
raise`, as F.gaussian_nll_loss does) converts, and one whose result depends on a branch raises
a clear error on inputs that take the branch the other way, instead of answering wrongly."""

import warnings

import pytest
import torch

from drtriton.capture import BRANCH_CHECK, Check, Graph, capture_module
from drtriton.policy.builtin import BuiltinPolicy
from drtriton.problem import from_source

GAUSSIAN_NLL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.GaussianNLLLoss()

    def forward(self, x, target, var):
        return self.loss(x, target, var)


def get_inputs():
    return [torch.randn(8, 5), torch.randn(8, 5), torch.rand(8, 5) + 0.1]


def get_init_inputs():
    return []
"""

BRANCH = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        # a sum near 32 at the example's 8 rows, near 16 at the verifier's other batch size (4)
        if x.sum() > 24:
            return x * 2
        return x - 1


def get_inputs():
    return [torch.rand(8, 8)]


def get_init_inputs():
    return []
"""

ASSERTS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        torch._assert_async((x > -100).all(), "x has an entry below -100")
        return x.relu() * 3


def get_inputs():
    return [torch.randn(4, 6)]


def get_init_inputs():
    return []
"""


def first_candidate(problem, graph):
    cand = next(iter(BuiltinPolicy("cpu").candidates(problem, graph, "strict")), None)
    assert cand is not None
    return cand


def test_a_validating_loss_converts_with_its_check(cpu_verifier):
    problem = from_source(GAUSSIAN_NLL, name="gaussian_nll")
    graph = cpu_verifier.capture(problem)  # export alone cannot branch on `torch.any(var < 0)`
    assert len(graph.checks) == 1 and graph.checks[0].message.startswith(BRANCH_CHECK)
    assert "torch.any(var < 0)" in graph.checks[0].message  # the line that branched
    cand = first_candidate(problem, graph)
    assert "raise RuntimeError('forward branched" in cand.source
    verdict = cpu_verifier.verify(problem, cand.source, mode="strict")
    assert verdict.correct, verdict.reasons


def test_a_branch_taken_the_other_way_raises_instead_of_answering_wrongly(cpu_verifier):
    problem = from_source(BRANCH, name="branch")
    graph = cpu_verifier.capture(problem)
    assert [c.message.split(" at ")[0] for c in graph.checks] == [BRANCH_CHECK]
    cand = first_candidate(problem, graph)
    verdict = cpu_verifier.verify(problem, cand.source, mode="strict")
    assert not verdict.correct
    assert any("`if x.sum() > 24:`" in r and "the other way" in r for r in verdict.reasons), verdict.reasons


def test_forwards_own_assertion_is_kept():
    ns: dict = {}
    exec(ASSERTS, ns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_module(ns["Model"](), ns["get_inputs"]())
    assert [c.message for c in graph.checks] == ["x has an entry below -100"]
    cand = first_candidate(from_source(ASSERTS, name="asserts"), graph)
    assert "raise RuntimeError('x has an entry below -100')" in cand.source
    # the condition is computed (x > -100, then a reduction, in Triton), not dropped as dead code
    assert cand.plan[0].startswith("gt,") and cand.plan[0].endswith(": Triton"), cand.plan


def test_checks_survive_serialisation():
    graph = Graph({}, [], [], [], [Check("c", "message")])
    assert Graph.from_dict(graph.to_dict()).checks == [Check("c", "message")]
    assert Graph.from_dict({k: v for k, v in graph.to_dict().items() if k != "checks"}).checks == []


@pytest.mark.parametrize("value", [True, False])
def test_branch_reads_are_recorded_not_refused(value):
    from drtriton.capture import Branch, record_reads

    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1 if (x > 0).all() else x

    x = torch.ones(3) if value else -torch.ones(3)
    reads = record_reads(M(), [x])
    assert len(reads) == 1 and isinstance(reads[0], Branch) and reads[0].taken is value


def test_a_branch_on_a_constant_stays_a_constant():
    from drtriton.capture import record_reads

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("doubled", torch.tensor(True))

        def forward(self, x):
            return x * 2 if self.doubled.any() else x

    assert record_reads(M(), [torch.ones(3)]) == [True]


def test_a_mask_written_in_place_from_the_inputs_is_checked_not_constant():
    from drtriton.capture import Branch, record_reads

    class M(torch.nn.Module):
        def forward(self, x):
            m = torch.zeros(x.shape[0], dtype=torch.bool)
            m[:] = x[:, 0] > 0
            return x * 2 if m.any() else x

    reads = record_reads(M(), [torch.ones(3, 2)])
    assert len(reads) == 1 and isinstance(reads[0], Branch) and reads[0].taken is True
