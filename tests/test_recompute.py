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


def test_a_read_keeps_its_size_one_dims_in_place(cpu_verifier):
    # BEiT's relative position table resized: a size-1 dim before a kept one. The sizes forward
    # checks the read tensor against skipped it (session 33), and every call raised
    src = source('x + F.interpolate(self.table.view(1, 7, 7, 4).permute(0, 3, 1, 2), size=(7, 7), mode="bilinear")',
                 "torch.randn(4, 7, 7)", init="self.table = nn.Parameter(torch.randn(49, 4))")
    check(cpu_verifier, src, [])


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
    """Both tables are read in the sum's kernel: the positions computed, the token ids loaded
    where each element needs its row (no embedding stored first)."""
    cand = check(cpu_verifier, GPT_POSITIONS, ["add"])
    assert "torch.arange" not in cand.source and len(cand.plan) == 1, cand.plan


BERT_EMBEDDINGS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(50, 16)
        self.position = nn.Embedding(32, 16)
        self.token_type = nn.Embedding(2, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, ids, types):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        return self.norm(self.word(ids) + self.position(pos) + self.token_type(types))


def get_inputs():
    return [torch.randint(0, 50, (1, 12)), torch.randint(0, 2, (1, 12))]  # (a batch of 1: the verifier doubles it)


def get_init_inputs():
    return []
'''

# tables read through stored ids (token embeddings, rows picked by an index tensor) in the kernel
# of their elementwise reader: Inductor's indirect loads
STORED_INDEX = [
    "torch.tanh(F.embedding(i, self.w)) * 2.0",
    "F.layer_norm(F.embedding(i, self.w) * 4.0, (8,))",
    "torch.index_select(self.w, 0, i.flatten()) + self.w[i.flatten()] * 0.5",
]


@pytest.mark.parametrize("expr", STORED_INDEX)
def test_a_table_read_through_stored_ids_is_read_in_the_kernel(cpu_verifier, expr):
    cand = check(cpu_verifier, source(expr, "torch.randint(0, 10, (6, 5))", args="i",
                                      init="self.w = nn.Parameter(torch.randn(10, 8))"), [])
    assert len(cand.plan) == 1 and "embedding" not in cand.plan[0] and "index" not in cand.plan[0], cand.plan


# reductions and softmax computing their input as they load it: rows read through ids, positions
READ_BY_REDUCTIONS = [
    ("F.embedding(i, self.w).mean(dim=1)", "torch.randint(0, 10, (6, 5))", "i"),  # bag-of-words pooling
    ("torch.softmax(self.w[i], -1)", "torch.randint(0, 10, (6, 5))", "i"),
    ("F.interpolate(x, scale_factor=2, mode='bilinear').sum(dim=(2, 3))", "torch.randn(2, 3, 5, 4)", "x"),
    ("torch.amax(F.embedding(i, self.w), dim=-1)", "torch.randint(0, 10, (6, 5))", "i"),
]


@pytest.mark.parametrize("expr,inputs,args", READ_BY_REDUCTIONS, ids=[c[0] for c in READ_BY_REDUCTIONS])
def test_a_reduction_computes_its_recomputed_input_as_it_loads_it(cpu_verifier, expr, inputs, args):
    cand = check(cpu_verifier, source(expr, inputs, args=args, init="self.w = nn.Parameter(torch.randn(10, 8))"), [])
    assert len(cand.plan) == 1, cand.plan


def test_a_reduction_over_reordered_dims_keeps_its_input_stored():
    """Non-adjacent reduced dims are copied into order first: that copy reads a stored tensor."""
    _, graph, _ = capture(source("F.embedding(i, self.w).sum(dim=(0, 2))", "torch.randint(0, 10, (6, 5))",
                                 args="i", init="self.w = nn.Parameter(torch.randn(10, 8))"))
    assert "embedding" in [f.label for f in Program(graph).fragments()]


def test_bert_embeddings_are_one_kernel(cpu_verifier):
    """Word, position and token-type rows summed in the layer norm's prologue, at two batch sizes."""
    problem, cand = first_candidate(BERT_EMBEDDINGS)
    assert len(cand.plan) == 1 and cand.plan[0].endswith("layer_norm: Triton"), cand.plan
    verdict = cpu_verifier.verify(problem, cand.source, mode="strict")
    assert verdict.correct and len(verdict.shapes_checked) == 2, (verdict.summary, verdict.flags)


@pytest.mark.parametrize("expr,inputs,args", [
    ("F.embedding(torch.cat([a, b], 1), self.w) * 2.0", "torch.randint(0, 10, (2, 3)), torch.randint(0, 10, (2, 4))",
     "a, b"),  # ids that are a cat, read elementwise itself
    ("F.embedding(i[:, p], self.w) * 2.0", "torch.randint(0, 10, (2, 8)), torch.randperm(8)", "i, p"),
])
def test_ids_computed_by_another_read_convert(cpu_verifier, expr, inputs, args):
    check(cpu_verifier, source(expr, inputs, args=args, init="self.w = nn.Parameter(torch.randn(10, 8))"), [])


def test_ids_read_by_a_template_that_cannot_load_them_are_stored():
    """A matmul reads the embedding as its operand: the lookup keeps its own kernel."""
    _, graph, _ = capture(source("F.embedding(i, self.w) @ torch.ones(8, 3, device=i.device)",
                                 "torch.randint(0, 10, (6, 5))", args="i",
                                 init="self.w = nn.Parameter(torch.randn(10, 8))"))
    program = Program(graph)
    assert "embedding" in [f.label for f in program.fragments()]


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


def test_a_failing_classification_leaves_the_positions_stored_and_says_so(cpu_verifier, monkeypatch):
    # a bug in recomputed_nodes must cost the fusion, not the conversion: the program keeps
    # every value stored (as before recompute existed), and the search's result says why
    from drtriton import search as search_module
    from drtriton.policy import recompute
    from drtriton.problem import from_source

    def broken(program):
        raise KeyError("a bug")

    monkeypatch.setattr(recompute, "recomputed_nodes", broken)
    _, graph, _ = capture(FPN)
    program = Program(graph)
    assert program.recomputed == set()
    (note,) = program.notes
    assert note.startswith("index arithmetic stored, not recomputed (KeyError: 'a bug' (test_recompute.py:"), note
    assert len(program.fragments()) > 1  # positions and reads are fragments of their own again
    s = search_module.Search(from_source(FPN), cpu_verifier, search_module.SearchConfig(mode="strict", budget_s=300))
    events = list(s.run())
    assert s.result.correct, s.result.reason
    assert note in s.result.notes
    assert note in [e.data.get("message") for e in events if e.kind == "status"]


# -- cat read elementwise: each element loaded from its branch (rotary embeddings) --------------

ROTARY = '''
import torch
import torch.nn as nn


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        emb = torch.arange(6 * 8, dtype=torch.float32).view(6, 8) / 10.0
        self.register_buffer("cos", emb.cos()[None, None], persistent=False)
        self.register_buffer("sin", emb.sin()[None, None], persistent=False)

    def forward(self, qkv):
        q = qkv[:, :, :, 0].transpose(1, 2)  # a strided view: the branches load through strides
        return q * self.cos + rotate_half(q) * self.sin


def get_inputs():
    return [torch.randn(2, 6, 3, 2, 8)]


def get_init_inputs():
    return []
'''

CATS = [
    # rotary embedding: the cat, the negation and both products in one kernel
    (ROTARY, 1),
    # three branches along dim 1, one of them broadcast from a smaller tensor and one computed
    (source("torch.cat([x, torch.relu(y.expand(2, 2, 5)), x[:, :1] * 3.0], dim=1) + 1.0",
            "torch.randn(2, 3, 5), torch.randn(1, 2, 5)", args="x, y"), 1),
    # the cat read by two kernels (the softmax's prologue and an elementwise one): computed in each
    (source("torch.softmax((c := torch.cat([x, -x], 1)) * 2.0, -1) + torch.exp(c)", "torch.randn(3, 4)"), None),
]


@pytest.mark.parametrize("src,kernels", CATS, ids=["rotary", "three_branches", "two_readers"])
def test_a_cat_read_elementwise_is_computed_in_its_readers(cpu_verifier, src, kernels):
    problem, graph, _ = capture(src)
    program = Program(graph)
    assert any(n.op == "cat" for n in program.nodes if n.name in program.recomputed)
    cand = check(cpu_verifier, src, [])
    assert "torch.cat" not in cand.source and "cat_kernel" not in cand.source
    if kernels is not None:
        assert len(cand.plan) == kernels, cand.plan


def test_a_cat_stays_stored_where_it_is_an_output_or_has_many_branches(cpu_verifier):
    many = source("torch.cat([x, x * 2.0, x * 3.0, x * 4.0, x * 5.0], 1) + 1.0", "torch.randn(2, 3)")
    kept = source("((c := torch.cat([x, -x], 1)), c * 2.0)", "torch.randn(2, 3)")
    # what feeds a stored cat is stored too, even where its other readers are elementwise
    # (corpus/torch/th_alias.py: `h` came along with the cat, then was left recomputed alone)
    output = source("torch.cat([x + (h := torch.sin(x) * 2.0), torch.abs(h)], -1)", "torch.randn(3, 4)")
    for src in (many, kept, output):
        _, graph, _ = capture(src)
        program = Program(graph)
        assert program.recomputed == set()
        check(cpu_verifier, src, ["cat"])


def test_a_rotary_kernel_refuses_a_wrongly_shaped_input(tmp_path, monkeypatch):
    _, cand = first_candidate(ROTARY)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # (read as the kernels are defined)
    model = _load(cand.source, tmp_path).ModelNew()
    qkv = torch.randn(2, 6, 3, 2, 8)
    q = qkv[:, :, :, 0].transpose(1, 2)
    half = torch.cat((-q[..., 4:], q[..., :4]), -1)
    torch.testing.assert_close(model(qkv), q * model.cos + half * model.sin)
    with pytest.raises(ValueError, match="convert it again with inputs shaped as you call it"):
        model(torch.randn(2, 6, 3, 2, 10))  # a head of 10: the branches were cut at 4


def test_a_rotary_fragment_run_as_pytorch_or_posed_alone_computes_the_cat():
    problem, graph, ns = capture(ROTARY)
    program = Program(graph)
    frags = [f for f in program.fragments() if f.kind != "view"]
    assert [f.label for f in frags] == ["mul, mul, add"]  # one kernel, the cat and -x2 inside
    (frag,) = frags
    lines = pytorch.emit(program, frag).lines
    assert any("aten.cat" in line for line in lines) and any("aten.neg" in line for line in lines)
    task = fragment_task(program, frag, problem)
    sub: dict = {}
    exec(task.problem.source, sub)
    model = ns["Model"]()
    qkv = torch.randn(2, 6, 3, 2, 8)
    q = qkv[:, :, :, 0].transpose(1, 2)
    assert sorted(task.inputs) == ["b_cos", "b_sin", "transpose"]  # q's halves are picked inside
    args = {"b_cos": model.cos, "b_sin": model.sin, "transpose": q}
    got = sub["Model"]()(*(args[v] for v in task.inputs))
    torch.testing.assert_close(got, model(qkv))


def test_pointwise_siblings_run_in_one_kernel(cpu_verifier):
    cand = check(cpu_verifier, source("x * y + torch.exp(y) * z", "torch.randn(4, 5), torch.randn(4, 5), torch.randn(4, 5)",
                                      args="x, y, z"), [])
    assert len(cand.plan) == 1, cand.plan
    # a sibling whose value another kernel needs first stays its own kernel
    cand = check(cpu_verifier, source("(a := x * y) + torch.softmax(a, -1) * z",
                                      "torch.randn(4, 5), torch.randn(4, 5), torch.randn(4, 5)", args="x, y, z"),
                 ["softmax"])
    assert len(cand.plan) >= 2, cand.plan


def test_a_cat_branch_of_another_size_gets_a_clear_error(tmp_path, monkeypatch):
    _, cand = first_candidate(source("torch.cat([x, y], 1) + 1.0", "torch.randn(2, 3), torch.randn(2, 2)", args="x, y"))
    assert len(cand.plan) == 1, cand.plan
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    x, y = torch.randn(2, 3), torch.randn(2, 2)
    torch.testing.assert_close(model(x, y), torch.cat([x, y], 1) + 1.0)
    with pytest.raises(ValueError, match=r"y has shape \(2, 4\) where this module reads one of sizes"):
        model(x, torch.randn(2, 4))  # read only up to column 2: the rest would be left out silently


PICKS = [
    # slices and selects read only by a cat: picked inside the kernel, no view made in forward
    ("torch.cat([x[:, 0], x[:, 2]], 1) * 2.0", "torch.randn(3, 4, 5)"),
    ("torch.cat([x[:, ::2], -x[:, 1::2]], 1) + 1.0", "torch.randn(3, 7)"),  # steps, odd sizes
    ("torch.cat([x[..., -3:], x[..., :-3]], -1) * x", "torch.randn(2, 3, 8)"),  # a roll, negative bounds
]


@pytest.mark.parametrize("expr,inputs", PICKS, ids=[p[0] for p in PICKS])
def test_slices_and_selects_read_by_a_cat_are_picked_in_the_kernel(cpu_verifier, expr, inputs):
    cand = check(cpu_verifier, source(expr, inputs), [])
    assert len(cand.plan) == 1, cand.plan
    assert "aten.slice" not in cand.source and "aten.select" not in cand.source


def test_a_picked_tensor_of_another_size_gets_a_clear_error(tmp_path, monkeypatch):
    _, cand = first_candidate(source("torch.cat([x[:, 4:], x[:, :4]], 1) + 1.0", "torch.randn(2, 6)"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    model = _load(cand.source, tmp_path).ModelNew()
    x = torch.randn(3, 6)  # another batch: fine
    torch.testing.assert_close(model(x), torch.cat([x[:, 4:], x[:, :4]], 1) + 1.0)
    with pytest.raises(ValueError, match=r"x has shape \(2, 9\) where this module reads one of sizes"):
        model(torch.randn(2, 9))  # the halves were cut for 6 columns


def test_index_select_of_a_0d_tensor_is_classified_without_error():
    # OpInfo's index_select sample: the classification raised IndexError on it (caught since by
    # the fallback above, which left a note); a 0-d tensor is simply not a read at positions
    _, graph, _ = capture(source("torch.index_select(x, 0, i)", "torch.randn(()), torch.tensor([0])", args="x, i"))
    program = Program(graph)
    assert program.notes == []
