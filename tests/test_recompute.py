"""Index arithmetic recomputed in the kernels that read it (drtriton/policy/recompute.py, issue 17).

Upsampling, interpolation and position tables lower to `arange`, elementwise arithmetic on it and
reads at the positions it gives. Before, each of those ran as its own fragment: bilinear
interpolation plus a 1x1 convolution was 13 kernels (and two `arange` calls in forward); now the
positions, the four reads and the blend are computed in the convolution's epilogue. Each case
runs capture -> BuiltinPolicy -> the Verifier under the Triton interpreter.
"""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import capture, check, first_candidate, source  # noqa: E402

from drtriton.policy.builtin import PYTORCH, BuiltinPolicy  # noqa: E402
from drtriton.policy.emit import pytorch  # noqa: E402
from drtriton.policy.fragments import fragment_task  # noqa: E402
from drtriton.policy.program import Program  # noqa: E402

FPN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lateral = nn.Conv2d(3, 3, kernel_size=1)

    def forward(self, coarse, fine):
        up = F.interpolate(coarse, size=fine.shape[-2:], mode="bilinear", align_corners=False)
        return self.lateral(fine) + up


def get_inputs():
    return [torch.randn(2, 3, 4, 5), torch.randn(2, 3, 8, 10)]


def get_init_inputs():
    return []
'''

GPT_POSITIONS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(50, 16)
        self.wpe = nn.Embedding(32, 16)

    def forward(self, ids):
        pos = torch.arange(0, ids.shape[1], dtype=torch.long, device=ids.device)
        return self.wte(ids) + self.wpe(pos)


def get_inputs():
    return [torch.randint(0, 50, (2, 12))]


def get_init_inputs():
    return []
'''

CASES = [
    # the read is the output: the gather template computes its positions
    ('F.interpolate(x, scale_factor=2, mode="nearest")', "torch.randn(2, 3, 5, 4)", ["index"]),
    ('F.interpolate(x, size=(7, 9), mode="nearest-exact")', "torch.randn(2, 3, 5, 4)", ["index"]),
    # reads blended elementwise: one kernel
    ('F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True) * 2.0', "torch.randn(2, 3, 5, 4)", []),
    ('torch.relu(F.interpolate(x, size=(9,), mode="linear"))', "torch.randn(2, 3, 5)", []),
    ('F.interpolate(x, scale_factor=(2, 1.5), mode="bicubic") + 1.0', "torch.randn(1, 2, 4, 6)", []),
    # a position that is one number (the load still a block), and a table read beside its producer:
    # the kernel that makes relu(x) must not also read it at computed positions
    ("x.index_select(0, torch.arange(2, 3, device=x.device))", "torch.randn(5)", ["index_select"]),
    # positions read by index_select, embedding and gather as their index: computed in their kernel
    ("x.index_select(1, (torch.arange(x.shape[1], device=x.device) + 5) % 7)", "torch.randn(4, 7)",
     ["index_select"]),
    ("F.embedding(torch.arange(5, device=x.device).view(1, 5) * 2, x)", "torch.randn(12, 3)", ["embedding"]),
    ("torch.gather(x, 1, (3 - torch.arange(4, device=x.device)).expand(3, 4))", "torch.randn(3, 4)", ["gather"]),
    # a causal mask made from two aranges, in the softmax's prologue (the rows template)
    ("torch.softmax(x.masked_fill(torch.arange(6, device=x.device)[None, :] > "
     "torch.arange(6, device=x.device)[:, None], float('-inf')), -1)", "torch.randn(2, 6, 6)", ["softmax"]),
    # a table that is itself position arithmetic (linspace), read at arange's positions
    ("x + torch.linspace(0.0, 1.0, 10, device=x.device)[torch.arange(x.shape[1], device=x.device) % 10]",
     "torch.randn(3, 7)", []),
]
TABLES = [
    # a learned table read at positions (relative position biases, position embeddings)
    ("x + self.table[torch.arange(x.shape[1], device=x.device) % 10]", "torch.randn(3, 7)",
     "self.table = nn.Parameter(torch.randn(10))"),
    ("x * self.table[:, torch.arange(x.shape[-1] - 1, -1, -1, device=x.device)]", "torch.randn(2, 4, 6)",
     "self.table = nn.Parameter(torch.randn(4, 6))"),  # reversed: a negative step
]


@pytest.mark.parametrize("expr,inputs,triton", CASES, ids=[c[0] for c in CASES])
def test_index_arithmetic_is_recomputed_and_correct(cpu_verifier, expr, inputs, triton):
    cand = check(cpu_verifier, source(expr, inputs), triton)
    assert "torch.arange" not in cand.source  # no position vector made in forward
    assert len(cand.plan) == 1, cand.plan  # one kernel: positions, reads and blend together


@pytest.mark.parametrize("expr,inputs,init", TABLES, ids=[c[0] for c in TABLES])
def test_a_table_read_at_positions_is_read_in_the_kernel(cpu_verifier, expr, inputs, init):
    cand = check(cpu_verifier, source(expr, inputs, init=init), [])
    assert "torch.arange" not in cand.source and len(cand.plan) == 1, cand.plan


def test_a_tensor_is_not_read_at_positions_by_the_kernel_that_writes_it(cpu_verifier):
    src = source("(y := torch.relu(x)) + y.index_select(1, torch.arange(x.shape[1] - 1, -1, -1, device=x.device))",
                 "torch.randn(6, 3)")
    cand = check(cpu_verifier, src, ["relu"])
    assert len(cand.plan) == 2, cand.plan  # relu stored first, then read back in reverse


def test_a_loss_prologue_with_positions(cpu_verifier):
    src = source("F.mse_loss(x * 2.0 + torch.arange(x.shape[1], device=x.device).float(), y)",
                 "torch.randn(4, 6), torch.randn(4, 6)", args="x, y")
    check(cpu_verifier, src, ["mse_loss"])


def _load(source: str, tmp_path):
    path = tmp_path / "converted.py"  # (Triton reads a kernel's source from its file)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("converted", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_positions_made_for_fixed_sizes_refuse_other_sizes(tmp_path, monkeypatch):
    # the positions have 3 rows, traced beside a batch of 3: a batch of 1 (which PyTorch would
    # broadcast to 3) or 8 (which PyTorch refuses) must not be computed at the wrong size
    src = source("y + self.t[torch.arange(3, device=y.device), :, torch.arange(3, device=y.device) + 1]",
                 "torch.randn(3, 5)", args="y", init="self.t = nn.Parameter(torch.randn(4, 5, 6))")
    _, cand = first_candidate(src)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # (read as the kernels are defined)
    model = _load(cand.source, tmp_path).ModelNew()
    y = torch.randn(3, 5)
    torch.testing.assert_close(model(y), y + model.t[torch.arange(3), :, torch.arange(3) + 1])
    for batch in (1, 8):
        with pytest.raises(ValueError, match="computes positions for sizes"):
            model(torch.randn(batch, 5))


def test_fragments_at_other_positions_have_other_keys():
    keys = []
    for start in (0, 2):
        src = source(f"x + x[:, torch.arange({start}, {start} + 4, device=x.device)] * 2.0", "torch.randn(3, 6)")
        problem, graph, _ = capture(src.replace("x + x[", "x[:, :4] + x["))
        program = Program(graph)
        frag = next(f for f in program.fragments() if f.kind == "pointwise")
        keys.append(fragment_task(program, frag, problem).key)
    assert keys[0] != keys[1]


def test_interpolation_merges_into_the_convolution_epilogue(cpu_verifier):
    problem, graph, _ = capture(FPN)
    program = Program(graph)
    assert [f.label for f in program.fragments()] == ["conv2d, add"]
    assert {n.target for n in program.nodes if n.name in program.recomputed} >= \
        {"aten.arange.default", "aten._unsafe_index.Tensor"}
    cand = check(cpu_verifier, FPN, ["conv2d"])
    assert cand.source.count("tl.load(coarse_ptr") == 4  # the four corners, read where they are blended


def test_a_position_embedding_is_read_in_the_sum(cpu_verifier):
    cand = check(cpu_verifier, GPT_POSITIONS, ["embedding"])
    assert "torch.arange" not in cand.source and len(cand.plan) == 1, cand.plan


def test_a_wrongly_shaped_input_gets_a_clear_error(tmp_path):
    problem, cand = first_candidate(FPN)
    model = _load(cand.source, tmp_path).ModelNew()
    with pytest.raises(ValueError, match="coarse has shape"):
        model(torch.randn(2, 3, 5, 5), torch.randn(2, 3, 8, 10))  # positions computed for 4 x 5


def test_a_fragment_run_as_pytorch_computes_the_positions_first(cpu_verifier):
    src = source('(F.interpolate(x, scale_factor=2, mode="bilinear") * 2.0) @ torch.ones(8, 3, device=x.device)',
                 "torch.randn(2, 3, 4, 4)")
    problem, graph, _ = capture(src)
    program = Program(graph)
    frags = program.fragments()
    reading = next(i for i, f in enumerate(frags) if f.kind == "pointwise")
    lines = pytorch.emit(program, frags[reading]).lines
    assert any("arange" in line for line in lines) and any("_unsafe_index" in line for line in lines)
    # the plan with that fragment left to PyTorch (mixed mode) runs and is correct
    cand = BuiltinPolicy("cpu").assemble(problem, program, frags,
                                         lambda i, f: PYTORCH if i == reading else 0, "mixed")
    verdict = cpu_verifier.verify(problem, cand.source, mode="mixed")
    assert verdict.correct, verdict.summary


def test_a_fragment_posed_alone_includes_its_positions():
    problem, graph, ns = capture(FPN)
    program = Program(graph)
    (frag,) = program.fragments()
    task = fragment_task(program, frag, problem)
    assert task.inputs == ["fine", "p_lateral_weight", "p_lateral_bias", "coarse"] or \
        sorted(task.inputs) == sorted(["fine", "p_lateral_weight", "p_lateral_bias", "coarse"])
    assert "arange" in task.problem.source
    # the problem computes what the whole module does
    sub: dict = {}
    exec(task.problem.source, sub)
    model = ns["Model"]()
    coarse, fine = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 8, 10)
    args = {"fine": fine, "coarse": coarse, "p_lateral_weight": model.lateral.weight,
            "p_lateral_bias": model.lateral.bias}
    got = sub["Model"]()(*(args[v] for v in task.inputs))
    torch.testing.assert_close(got, model(coarse, fine))


def test_positions_read_by_a_template_that_cannot_compute_them_are_stored():
    # a matmul reads the interpolated tensor as its operand: the read is stored (its own kernel)
    src = source('F.interpolate(x, scale_factor=2, mode="nearest") @ torch.ones(10, 3, device=x.device)',
                 "torch.randn(2, 3, 5, 5)")
    _, graph, _ = capture(src)
    program = Program(graph)
    kinds = [f.kind for f in program.fragments()]
    assert "indexing" in kinds, kinds  # the upsampled tensor is made, its positions recomputed in it
    assert not any(n.target == "aten._unsafe_index.Tensor" for n in program.nodes if n.name in program.recomputed)
