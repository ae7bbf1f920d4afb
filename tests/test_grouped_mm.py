"""The grouped product of mixtures of experts (`grouped_mm`, transformers' grouped_mm_fallback) as
one Triton kernel: a tile of one group's rows per program, the groups' ends read on the device
(policy/emit/grouped.py). Through capture -> BuiltinPolicy -> the Verifier under the Triton
interpreter, in strict mode."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers.integrations.moe")

from test_policy_pool_scan_loss import capture, check  # noqa: E402

GROUPED = '''
import torch
import torch.nn as nn
from transformers.integrations import moe


class Model(nn.Module):
    """Rows sorted by expert through their expert's weights, scaled by a routing weight each."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn({groups}, 24, 40))

    def forward(self, x, ends, route):
        return torch.ops.transformers.grouped_mm_fallback(x, self.weight, ends) * route[:, None]


def get_inputs():
    # sorted ends: empty groups, and rows past the last end (which are 0)
    return [torch.randn({rows}, 24), torch.randint(0, {rows} + 1, ({groups},)).sort().values.to(torch.int32),
            torch.rand({rows})]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("rows,groups", [(70, 5), (9, 3), (130, 1)])
def test_each_groups_rows_go_through_its_weights_in_one_kernel(cpu_verifier, rows, groups):
    # 70 rows over 5 groups: tiles of 64 rows cut at group ends; 130 over 1: several tiles a group
    cand = check(cpu_verifier, GROUPED.format(rows=rows, groups=groups), ["grouped_mm, mul"])
    forward = cand.source.split("def forward", 1)[1]
    assert "torch.ops.transformers" not in forward and forward.count("_kernel[") == 1, forward


def test_the_grouped_kernel_computes_each_row_once():
    # every row through every expert would be G products of (M, K) x (K, N): the kernel's grid
    # bounds the tiles to cdiv(M, BM) + G + 1 row tiles, each of one group's rows
    from test_policy_pool_scan_loss import first_candidate

    _, cand = first_candidate(GROUPED.format(rows=70, groups=5))
    assert "_cdiv(_M, meta['BM']) + _G + 1" in cand.source
    assert "w_ptr + grp.to(tl.int64) * stride_bg" in cand.source


def test_the_operator_is_captured_with_its_ends():
    _, graph, _ = capture(GROUPED.format(rows=9, groups=3))
    (node,) = [n for n in graph.nodes if n.op == "grouped_mm"]
    x, w, ends = [a["value"] for a in node.args]
    assert graph.values[w].shape == [3, 24, 40] and graph.values[ends].shape == [3]


def test_the_vocabularys_reference_is_transformers_fallback():
    from transformers.integrations import moe

    from drtriton import ops

    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(11, 6, generator=gen), torch.randn(4, 6, 5, generator=gen)
    for ends in ([0, 3, 3, 8], [11, 11, 11, 11], [2, 5, 9, 11], [0, 0, 0, 0]):
        ends = torch.tensor(ends, dtype=torch.int32)
        want = moe._grouped_mm_fallback(x, w, ends)
        assert torch.allclose(ops.get("grouped_mm").reference([x, w, ends], {}), want, atol=1e-6), ends


def test_a_fragment_problem_imports_the_library_that_registers_the_operator():
    # a fragment verified alone runs in a process that never imported transformers
    from drtriton.policy.builtin import BuiltinPolicy
    from drtriton.policy.fragments import fragment_task
    from drtriton.policy.program import Program

    problem, graph, _ = capture(GROUPED.format(rows=9, groups=3))
    program = Program(graph)
    frags = BuiltinPolicy("cpu").cuts(program)[0]
    frag = next(f for f in frags if f.anchor is not None and f.anchor.op == "grouped_mm")
    task = fragment_task(program, frag, problem)
    assert "import transformers.integrations.moe" in task.problem.source
    ns: dict = {}
    exec(task.problem.source, ns)  # noqa: S102 - our own generated reference
    model, inputs = ns["Model"](), ns["get_inputs"]()
    ends = next(t for t in inputs if t.dtype in (torch.int32, torch.int64))
    assert torch.equal(ends, ends.sort().values) and int(ends.max()) <= 9  # drawn as sorted ends
    assert model(*inputs).shape == (9, 40)
