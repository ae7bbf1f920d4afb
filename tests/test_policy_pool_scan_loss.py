"""The built-in policy's pool, scan, loss, batch-norm and attention emitters, end to end on CPU:
capture -> BuiltinPolicy candidates (strict mode unless said) -> the first candidate verified
correct by the Verifier under the Triton interpreter. Shapes are tiny (the interpreter is slow)
but chosen so loops run more than once: windows across tile edges, scans over several blocks,
losses over several programs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from drtriton.capture import capture_module  # noqa: E402
from drtriton.policy.builtin import EMITTERS, LIBRARY, PYTORCH, BuiltinPolicy  # noqa: E402
from drtriton.policy.emit import Names, Unsupported  # noqa: E402
from drtriton.policy.program import Fragment, Program  # noqa: E402
from drtriton.problem import from_source  # noqa: E402

TEMPLATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def source(expr: str, inputs: str, args: str = "x", init: str = "") -> str:
    init = "\n".join(f"        {line}" for line in init.splitlines()) if init else "        pass"
    return TEMPLATE.format(expr=expr, inputs=inputs, args=args, init=init)


def capture(src: str, init: bool = False):
    problem = from_source(src, name="case")
    ns: dict = {}
    exec(problem.source, ns)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = ns[problem.class_name](*(ns[problem.init_inputs_fn]() if init and problem.init_inputs_fn else []))
        args = list(ns[problem.inputs_fn]())
        graph = capture_module(model, args)
    return problem, graph, ns


def first_candidate(src: str, mode: str = "strict"):
    problem, graph, _ = capture(src)
    cand = next(iter(BuiltinPolicy("cpu").candidates(problem, graph, mode)), None)
    assert cand is not None, f"no {mode} candidate"
    return problem, cand


def check(verifier, src: str, triton: list[str], mode: str = "strict"):
    """The first candidate is correct and runs the named operators in Triton."""
    problem, cand = first_candidate(src, mode)
    for op in triton:
        assert any(op in line and "Triton" in line for line in cand.plan), (op, cand.plan)
    verdict = verifier.verify(problem, cand.source, mode=mode)
    assert verdict.correct, f"{cand.description}: {verdict.summary}"
    return cand


# -- pooling -----------------------------------------------------------------------------------

POOLS = [
    ("F.max_pool2d(x, 3, 2, 1, 1, True)", "torch.randn(2, 3, 11, 10)", "max_pool2d"),  # ceil_mode
    ("F.max_pool1d(x, 4, 1, 2, 3)", "torch.randn(2, 3, 17)", "max_pool1d"),  # dilation
    ("F.max_pool3d(x, 3, 2, 1, 2)", "torch.randn(1, 2, 9, 8, 9)", "max_pool3d"),
    ("F.max_pool2d(x, 2)", "torch.randn(3, 8, 9)", "max_pool2d"),  # unbatched
    ("F.avg_pool2d(x, 3, 2, 1, True, False)", "torch.randn(2, 3, 11, 10)", "avg_pool2d"),
    ("F.avg_pool2d(x, 3, 2, 1, True, True)", "torch.randn(2, 3, 11, 10)", "avg_pool2d"),
    ("F.avg_pool1d(x, 4, 3, 2, False, True)", "torch.randn(2, 3, 17)", "avg_pool1d"),
    ("F.avg_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0), True, False)", "torch.randn(1, 2, 9, 8, 9)",
     "avg_pool3d"),
    ("F.adaptive_avg_pool2d(x, (3, 4))", "torch.randn(2, 3, 11, 10)", "adaptive_avg_pool2d"),
    ("F.adaptive_avg_pool2d(x, 1)", "torch.randn(2, 3, 40, 30)", "adaptive_avg_pool2d"),  # global
    ("F.adaptive_avg_pool3d(x, (2, 3, 5))", "torch.randn(2, 2, 9, 8, 9)", "adaptive_avg_pool3d"),
]


@pytest.mark.parametrize("expr,inputs,op", POOLS, ids=[p[0] for p in POOLS])
def test_pool(cpu_verifier, expr, inputs, op):
    check(cpu_verifier, source(expr, inputs), [op])


def test_pool_with_fused_epilogue(cpu_verifier):
    cand = check(cpu_verifier, source("torch.tanh(F.avg_pool2d(x, 2)) * 2.0 + y", "torch.randn(2, 3, 8, 8), "
                                      "torch.randn(3, 1, 1)", args="x, y"), ["avg_pool2d, tanh, mul_scalar, add"])
    assert cand.source.count("@triton.jit") == 1


@pytest.mark.parametrize("expr", ["F.max_pool2d(torch.relu(x * y), 3, 2, 1)",
                                  "F.avg_pool2d(x * y + 3.0, 3, 2, 1)",  # padding must stay 0, not 3
                                  "F.adaptive_avg_pool2d(x * y + 3.0, (2, 4))"])
def test_pool_with_fused_prologue(cpu_verifier, expr):
    """With overlapping windows the planner gives pools no prologue (it would run once per
    window); the emitter takes one all the same (hand-made fragment here)."""
    problem, graph, _ = capture(source(expr, "torch.randn(2, 3, 9, 9), torch.randn(3, 1, 1)", args="x, y"))
    program = Program(graph)
    frags = program.fragments()
    assert [f.kind for f in frags] == ["pointwise", "pool"]
    pre, pool = frags
    fused = Fragment(pre.nodes + pool.nodes, pool.anchor, "pool", prologue=pre.nodes)
    cand = BuiltinPolicy("cpu").assemble(problem, program, [fused], lambda i, f: 0, "strict")
    assert cand.source.count("@triton.jit") == 1
    verdict = cpu_verifier.verify(problem, cand.source)
    assert verdict.correct, verdict.summary


@pytest.mark.parametrize("expr,label", [
    ("F.max_pool2d(torch.relu(x * y), 2)", "mul, relu, max_pool2d"),
    ("F.avg_pool2d(torch.tanh(x) - 0.5, 3)", "tanh, add_scalar, avg_pool2d"),  # windows tile 9 x 9
    ("F.adaptive_avg_pool2d(F.gelu(x), 1)", "gelu, adaptive_avg_pool2d"),  # global
])
def test_pool_takes_its_prologue_when_windows_do_not_overlap(cpu_verifier, expr, label):
    args = "x, y" if "y" in expr else "x"
    inputs = "torch.randn(2, 3, 9, 9)" + (", torch.randn(3, 1, 1)" if "y" in expr else "")
    cand = check(cpu_verifier, source(expr, inputs, args=args), [label])
    assert cand.source.count("@triton.jit") == 1


def test_library_conv_epilogue_becomes_the_pools_prologue(cpu_verifier):
    """KernelBench L2/67's shape: conv, gelu, global average pool. With cuDNN running the conv,
    gelu is computed as the pool reads the conv's output (one Triton kernel)."""
    src = source("F.adaptive_avg_pool2d(F.gelu(self.conv(x)), 1)", "torch.randn(2, 3, 10, 10)",
                 init="self.conv = nn.Conv2d(3, 4, 3)")
    problem, graph, _ = capture(src)
    program = Program(graph)
    policy = BuiltinPolicy("cpu")
    frags = policy.cuts(program)[0]
    cand = policy.assemble(problem, program, frags, lambda i, f: LIBRARY if f.kind == "conv" else 0, "mixed")
    assert cand.plan == ["conv2d: PyTorch", "gelu, adaptive_avg_pool2d: Triton"], cand.plan
    verdict = cpu_verifier.verify(problem, cand.source, mode="mixed")
    assert verdict.correct, verdict.summary


# -- scans ---------------------------------------------------------------------------------------

SCANS = [
    ("torch.cumsum(x, dim=1)", "torch.randn(3, 2100)", "cumsum"),  # carried over 3 blocks
    ("torch.cumsum(x, dim=0)", "torch.randn(37, 5, 3)", "cumsum"),  # a strided axis, 2 blocks
    ("torch.cumprod(x, dim=1)", "torch.rand(3, 40, 5) + 0.5", "cumprod"),
    ("torch.cumprod(x, dim=-1)", "torch.rand(4, 14) + 0.5", "cumprod"),
    ("torch.cumsum(x * y, dim=1)", "torch.randn(4, 1500), torch.rand(4, 1500) > 0.5", "mul, cumsum"),  # masked
    ("torch.cumsum(x.flip(1), 1).flip(1)", "torch.randn(3, 1500)", "flip, cumsum, flip"),  # reverse
    ("torch.relu(torch.cumsum(x.flip(0), 0)).flip(0)", "torch.randn(40, 3, 5)", "flip, cumsum, relu, flip"),
    ("torch.cumsum(x.flip(1), 1)", "torch.randn(3, 70)", "flip, cumsum"),
    # long scans with few rows: chunks of R, each started from the totals of the chunks before
    ("torch.cumsum(x, dim=0)", "torch.randn(40000)", "cumsum"),
    ("torch.cumsum(x.flip(0), 0).flip(0)", "torch.randn(40000, 2)", "flip, cumsum, flip"),
    ("torch.cumprod(x, 0)", "1 + 1e-4 * torch.randn(40000)", "cumprod"),
    ("torch.cumsum(x > 0, 0)", "torch.randn(40000)", "cumsum"),  # int64, a compaction's
    # 66 chunks: their totals read 64 at a time, so twice
    ("torch.cumsum(x, 0) * 0.5", "torch.randn(270000)", "cumsum"),
]


@pytest.mark.parametrize("expr,inputs,label", SCANS, ids=[s[0] for s in SCANS])
def test_scan(cpu_verifier, expr, inputs, label):
    args = "x, y" if "y" in expr else "x"
    cand = check(cpu_verifier, source(expr, inputs, args=args), [label])
    assert len(cand.plan) == 1  # flips and the mask multiply are fused: one kernel


def test_exclusive_cumsum_falls_back_in_mixed_mode(cpu_verifier):
    """KernelBench 92: cat/zeros_like have no template; the cumsum still runs in Triton."""
    expr = "torch.cumsum(torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x), dim=1)[:, :-1], dim=1)"
    check(cpu_verifier, source(expr, "torch.randn(3, 70)"), ["cumsum"], mode="mixed")


def test_split_keeps_folded_flips_in_order(cpu_verifier):
    """In mixed mode a fused scan run as PyTorch is taken apart; the flips folded into it must
    stay, in order, around the anchor and its epilogue."""
    problem, graph, _ = capture(source("torch.relu(torch.cumsum(x.flip(1), 1)).flip(1)", "torch.randn(3, 70)"))
    policy = BuiltinPolicy("cpu")
    program = Program(graph)
    (frags,) = [c for c in policy.cuts(program) if len(c) == 1]
    cand = policy.assemble(problem, program, frags, lambda i, f: PYTORCH if f.anchor else 0, "mixed")
    assert cand.plan == ["flip, cumsum: PyTorch", "relu: Triton", "flip: PyTorch"]
    verdict = cpu_verifier.verify(problem, cand.source, mode="mixed")
    assert verdict.correct, verdict.summary


# -- losses --------------------------------------------------------------------------------------

XY = "torch.randn(5, 900), torch.randn(5, 900)"
LOGITS = "torch.randn(70, 300), torch.randint(-1, 300, (70,))"
LOGITS_SPATIAL = "torch.randn(3, 7, 5, 4), torch.randint(-1, 7, (3, 5, 4))"
TRIPLET = "torch.randn(70, 40), torch.randn(70, 40), torch.randn(70, 40)"
LOSSES = [
    ("F.mse_loss(x, y)", XY, "mse_loss"),
    ("F.mse_loss(x, y, reduction='sum')", XY, "mse_loss"),
    ("F.mse_loss(x, y, reduction='none')", XY, "mse_loss"),
    ("F.mse_loss(x, y[0])", XY, "mse_loss"),  # broadcast target (PyTorch warns)
    ("F.smooth_l1_loss(x, y)", XY, "smooth_l1_loss"),
    ("F.smooth_l1_loss(x, y, beta=0.5, reduction='none')", XY, "smooth_l1_loss"),
    ("F.kl_div(torch.log_softmax(x, 1), torch.softmax(y, 1), reduction='batchmean')", XY, "kl_div"),
    ("F.kl_div(x, torch.relu(y), reduction='mean')", XY, "kl_div"),
    ("F.kl_div(x, torch.relu(y), reduction='none')", XY, "kl_div"),
    ("F.cross_entropy(x, y, ignore_index=-1)", LOGITS, "cross_entropy"),
    ("F.cross_entropy(x, y, ignore_index=-1, reduction='sum')", LOGITS, "cross_entropy"),
    ("F.cross_entropy(x, y, ignore_index=-1, reduction='none')", LOGITS_SPATIAL, "cross_entropy"),
    ("F.cross_entropy(x, y, ignore_index=-1)", LOGITS_SPATIAL, "cross_entropy"),
    ("F.triplet_margin_loss(x, y, z)", TRIPLET, "triplet_margin_loss"),
    ("F.triplet_margin_loss(x, y, z, margin=0.5, eps=0.5, reduction='none')", TRIPLET, "triplet_margin_loss"),
]


@pytest.mark.parametrize("expr,inputs,op", LOSSES, ids=[f"{e} {i[:12]}" for e, i, _ in LOSSES])
def test_loss(cpu_verifier, expr, inputs, op):
    args = "x, y, z" if "z" in expr else "x, y"
    check(cpu_verifier, source(expr, inputs, args=args), [op])


@pytest.mark.parametrize("expr,inputs,label", [
    ("F.mse_loss(torch.relu(x) * 2.0, y)", XY, "relu, mul_scalar, mse_loss"),  # broadcast_tensors: lowered
    ("F.cross_entropy(x * 2.0, y, ignore_index=-1)", LOGITS, "mul_scalar, cross_entropy"),
    ("F.triplet_margin_loss(torch.tanh(x), y, z, reduction='sum')", TRIPLET, "tanh, triplet_margin_loss"),
])
def test_loss_with_fused_prologue(cpu_verifier, expr, inputs, label):
    args = "x, y, z" if "z" in expr else "x, y"
    cand = check(cpu_verifier, source(expr, inputs, args=args), [label])
    assert len(cand.plan) == 1


# -- batch norm ----------------------------------------------------------------------------------

BN = [
    ("nn.BatchNorm2d(3)", "torch.relu(self.bn(x))", "torch.randn(4, 3, 5, 6) * 3 + 1"),
    ("nn.BatchNorm1d(70, momentum=0.3, eps=1e-3)", "self.bn(x * 2.0)", "torch.randn(33, 70) * 3 + 1"),
    ("nn.BatchNorm3d(3, affine=False)", "self.bn(x)", "torch.randn(2, 3, 4, 5, 3)"),
    ("nn.BatchNorm2d(3, track_running_stats=False)", "self.bn(x)", "torch.randn(4, 3, 5, 6)"),
    # planes of 72: applied a plane per program row (the others: the flat output)
    ("nn.BatchNorm2d(3)", "torch.sigmoid(self.bn(x)) * x", "torch.randn(2, 3, 8, 9) * 3 + 1"),
]


@pytest.mark.parametrize("module,expr,inputs", BN, ids=[b[0] for b in BN])
def test_batch_norm_training(cpu_verifier, module, expr, inputs):
    check(cpu_verifier, source(expr, inputs, init=f"self.bn = {module}"), ["batch_norm"])


RUN_TWICE = """
import json, sys
import torch
ns, cns = {}, {}
exec(open(sys.argv[1]).read(), ns)
exec(compile(open(sys.argv[2]).read(), "candidate", "exec"), cns)
ref, new = ns["Model"](), cns["ModelNew"]()
new.load_state_dict(ref.state_dict())
outputs = []
for _ in range(2):
    x = ns["get_inputs"]()[0]
    outputs.append((new(x.clone()) - ref(x)).abs().max().item())
state = {k: (new.state_dict()[k].double() - v.double()).abs().max().item() for k, v in ref.state_dict().items()}
print(json.dumps({"outputs": outputs, "state": state, "batches": int(new.bn.num_batches_tracked)}))
"""


def test_batch_norm_updates_running_stats_like_pytorch(tmp_path):
    """A drop-in replacement: after two training steps the running statistics and the batch
    counter equal nn.BatchNorm's (the verifier compares outputs only, so run it here, in a
    subprocess: TRITON_INTERPRET must be set before triton is imported)."""
    src = source("torch.relu(self.bn(x))", "torch.randn(4, 3, 5, 6) * 3 + 1",
                 init="self.bn = nn.BatchNorm2d(3, momentum=0.2)")
    problem, cand = first_candidate(src)
    assert problem.candidate_class == "ModelNew"
    (tmp_path / "problem.py").write_text(problem.source)
    (tmp_path / "candidate.py").write_text(cand.source)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", RUN_TWICE, str(tmp_path / "problem.py"),
                           str(tmp_path / "candidate.py")], capture_output=True, text=True, env=env, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert max(result["outputs"]) < 1e-5, result
    assert result["state"].keys() == {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                                      "bn.num_batches_tracked"}
    assert max(result["state"].values()) < 1e-5, result
    assert result["batches"] == 2


def test_batch_norm_eval_mode(cpu_verifier):
    """training=False: an affine map with the running statistics (which stay as they are)."""
    init = "\n".join(["self.w = nn.Parameter(torch.randn(3))", "self.b = nn.Parameter(torch.randn(3))",
                      "self.register_buffer('rm', torch.randn(3))",
                      "self.register_buffer('rv', torch.rand(3) + 0.5)"])
    expr = "torch.tanh(F.batch_norm(x, self.rm, self.rv, self.w, self.b, training=False, eps=1e-3))"
    problem, graph, _ = capture(source(expr, "torch.randn(4, 3, 5, 6) * 3 + 1", init=init))
    (bn,) = [n for n in graph.nodes if n.op == "batch_norm"]
    assert bn.attrs["training"] is False
    cand = check(cpu_verifier, source(expr, "torch.randn(4, 3, 5, 6) * 3 + 1", init=init), ["batch_norm, tanh"])
    assert cand.source.count("@triton.jit") == 1  # scale and shift computed in the one kernel
    plain = "F.batch_norm(x, self.rm, self.rv, training=False)"  # no weight, no bias
    cand = check(cpu_verifier, source(plain, "torch.randn(4, 3, 5, 6) * 3 + 1", init=init), ["batch_norm"])
    assert cand.source.count("@triton.jit") == 1
    # planes of 40 elements: a program per (plane, block), channel and affine map scalars
    cand = check(cpu_verifier, source(expr, "torch.randn(4, 3, 5, 8) * 3 + 1", init=init), ["batch_norm, tanh"])
    assert "c = plane % C" in cand.source and "@triton.autotune" not in cand.source
    cand = check(cpu_verifier, source(plain, "torch.randn(4, 3, 5, 8) * 3 + 1", init=init), ["batch_norm"])
    assert "c = plane % C" in cand.source


# -- attention -----------------------------------------------------------------------------------

ATTENTION = [
    ("F.scaled_dot_product_attention(q, k, v)", "torch.randn(2, 3, 40, 24), torch.randn(2, 3, 70, 24), "
     "torch.randn(2, 3, 70, 20)"),
    ("F.scaled_dot_product_attention(q, k, v, is_causal=True)", "torch.randn(1, 2, 70, 16), "
     "torch.randn(1, 2, 70, 16), torch.randn(1, 2, 70, 16)"),
    ("F.scaled_dot_product_attention(q, k, v)", "torch.randn(1, 2, 33, 200), torch.randn(1, 2, 50, 200), "
     "torch.randn(1, 2, 50, 150)"),  # wide heads: D in chunks, DV in one program (up to 256)
    ("F.scaled_dot_product_attention(q, k, v)", "torch.randn(1, 2, 33, 40), torch.randn(1, 2, 50, 40), "
     "torch.randn(1, 2, 50, 300)"),  # value heads past 256: columns over programs
    ("torch.relu(F.scaled_dot_product_attention(q, k, v)) * 2.0", "torch.randn(3, 33, 8), "
     "torch.randn(3, 50, 8), torch.randn(3, 50, 8)"),  # rank 3, epilogue
]


@pytest.mark.parametrize("expr,inputs", ATTENTION, ids=[f"{e} {i[:24]}" for e, i in ATTENTION])
def test_attention(cpu_verifier, expr, inputs):
    cand = check(cpu_verifier, source(expr, inputs, args="q, k, v"), ["scaled_dot_product_attention"])
    assert 'input_precision="ieee"' in cand.source


# PyTorch's own mask, scale and grouped heads (transformers' sdpa path): one kernel reading the
# mask through its broadcast strides; rows a mask hides entirely give zeros (PyTorch's safe softmax)
MASKED_ATTENTION = [
    ("F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3, enable_gqa=True)",
     "torch.randn(2, 4, 20, 16), torch.randn(2, 2, 30, 16), torch.randn(2, 2, 30, 12), "
     "(torch.rand(20, 30) > 0.3) & (torch.arange(20) != 3)[:, None]"),  # boolean, row 3 hidden
    ("F.scaled_dot_product_attention(q, k, v, attn_mask=m)",
     "torch.randn(2, 3, 20, 16), torch.randn(2, 3, 40, 16), torch.randn(2, 3, 40, 16), "
     "torch.where(torch.rand(2, 1, 1, 40) > 0.2, 0.0, torch.finfo(torch.float32).min)"),  # padding
    ("torch.tanh(F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=1.0))",
     "torch.randn(3, 20, 8), torch.randn(3, 24, 8), torch.randn(3, 24, 8), "
     "torch.randn(20, 24).masked_fill(torch.arange(20)[:, None] == 5, float('-inf'))"),  # a bias; row 5: -inf
]


@pytest.mark.parametrize("expr,inputs", MASKED_ATTENTION, ids=[f"{e[35:70]} {i[-30:]}" for e, i in MASKED_ATTENTION])
def test_masked_attention(cpu_verifier, expr, inputs):
    cand = check(cpu_verifier, source(expr, inputs, args="q, k, v, m"), ["masked_attention"])
    assert cand.source.count("@triton.jit") == 1 and "_m = m.expand(_B, _H, _L, _S)" in cand.source


def test_attention_keeps_matmul_routing(cpu_verifier):
    check(cpu_verifier, source("torch.relu(x @ y)", "torch.randn(20, 30), torch.randn(30, 10)", args="x, y"),
          ["matmul, relu"])


# -- every KernelBench fragment of these kinds generates code ----------------------------------------


def test_kernelbench_fragments_emit(kernelbench_dir):
    policy = BuiltinPolicy("cuda")
    emitted, failures = 0, []
    for level in (1, 2):
        for line in (kernelbench_dir / f"level{level}.jsonl").read_text().splitlines():
            d = json.loads(line)
            _, graph, _ = capture(d["code"], init=True)
            program = Program(graph)
            for frags in policy.cuts(program):
                for frag in frags:
                    if not (frag.kind in ("pool", "scan", "loss") or frag.anchor is not None and frag.anchor.op
                            in ("batch_norm", "scaled_dot_product_attention")):
                        continue
                    emitter = EMITTERS[frag.kind]
                    for config in emitter.configs(program, frag):
                        try:
                            emitter.emit(program, frag, config, Names(), device="cuda")
                            emitted += 1
                        except Unsupported as e:
                            failures.append(f"L{level}/{d['name']}: {frag.label}: {e}")
    assert not failures, failures
    assert emitted >= 80


LONG_CUMSUM = """
import json, sys
import torch
cns = {}
exec(compile(open(sys.argv[1]).read(), "candidate", "exec"), cns)
x = torch.rand(2, 60000, generator=torch.Generator().manual_seed(0))
got = cns["ModelNew"]()(x).double()
exact = torch.cumsum(x.double(), dim=1)
ulp = torch.finfo(torch.float32).eps * exact.abs().clamp(min=1e-30)
print(json.dumps({"ours": ((got - exact).abs() / ulp).max().item(),
                  "torch": ((torch.cumsum(x, dim=1).double() - exact).abs() / ulp).max().item()}))
"""


def test_a_long_float32_cumsum_is_rounded_once_from_a_float64_sum(tmp_path):
    """60,000 positive terms: the running total keeps float64's accuracy, each result rounded
    once (within an ulp of the exact sum), so thresholds on it decide as the exact sum does."""
    _, cand = first_candidate(source("torch.cumsum(x, dim=1)", "torch.rand(2, 60000)"))
    (tmp_path / "candidate.py").write_text(cand.source)
    (tmp_path / "run.py").write_text(LONG_CUMSUM)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "candidate.py")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = json.loads(proc.stdout.splitlines()[-1])
    assert errors["ours"] <= 1.0, errors  # (eps-relative: one ulp is at most eps * |x|)
