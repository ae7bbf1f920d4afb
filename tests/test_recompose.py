"""Hand-written operator patterns put back as one vocabulary operator (`drtriton/recompose.py`):
RMS normalisation as Llama-style models and T5 write it becomes one `rms_norm` node, converts to
one kernel (with the casts and the weight fused around it) and computes what the module does;
where the pattern's inner values are read elsewhere, or the dims or dtype differ, it stays."""

import re
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn

from drtriton.capture import capture_module, value_refs
from test_real_modules import convert, failures

LLAMA = """
import torch
import torch.nn as nn


class Model(nn.Module):
    \"\"\"transformers' LlamaRMSNorm (Qwen, Mistral and Phi-3 have the same), then a projection.\"\"\"

    def __init__(self, hidden=24, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps
        self.proj = nn.Linear(hidden, 8)

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        return self.proj(self.weight * hidden_states.to(input_dtype))


def get_inputs():
    return [torch.randn(3, 5, 24) * 3]


def get_init_inputs():
    return []
"""


def ops(module, *inputs) -> list[str]:
    return [n.op or n.target for n in capture_module(module, list(inputs)).nodes]


class T5Norm(nn.Module):  # transformers' T5LayerNorm: the square of a cast, the product of x
    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + 1e-6)


class Divided(nn.Module):  # x / sqrt(mean(x * x) + eps), the mean's operand multiplied out
    def forward(self, x):
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + 1e-5)


class VarianceKept(nn.Module):  # the mean is read again: the five operators stay
    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + 1e-6) + variance


class OtherDim(nn.Module):  # the mean over dim 1 (channels first): not rms_norm over the last dim
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6)


def test_hand_written_rms_norms_become_one_operator():
    x = torch.randn(2, 4, 16)
    for module in (T5Norm(), Divided()):
        found = ops(module, x)
        assert found.count("rms_norm") == 1, (module, found)
        assert not {"pow", "mean", "rsqrt", "sqrt", "add_scalar"} & set(found), (module, found)


@pytest.mark.parametrize("module", [VarianceKept(), OtherDim()], ids=["variance-read-again", "channels-dim"])
def test_patterns_whose_parts_are_needed_or_that_differ_stay_as_written(module):
    found = ops(module, torch.randn(2, 4, 16))
    assert "rms_norm" not in found and "mean" in found and "rsqrt" in found


def test_half_precision_stays_as_written():
    """Each written step rounds to half precision; the fused operator rounds only its result."""
    found = ops(T5Norm().half(), torch.randn(2, 4, 16).half())
    assert "rms_norm" not in found and "mean" in found


def test_a_llama_rms_norm_converts_to_one_kernel_and_matches_the_module(cpu_verifier):
    ns: dict = {}
    exec(LLAMA, ns)
    found = ops(ns["Model"](), *ns["get_inputs"]())
    assert found.count("rms_norm") == 1 and "pow" not in found
    _, result, _ = convert(cpu_verifier, textwrap.dedent(LLAMA), mode="strict")
    assert result.correct, failures(result)
    # the cast before, the norm, the cast after and the weight: one fragment, one kernel
    assert result.plan.split(";")[0] == "to_dtype, rms_norm, to_dtype, mul: Triton", result.plan
    launched = re.findall(r"\n\s+(\w+)\[", result.source.split("def forward")[1])
    assert launched == ["to_dtype_rms_norm_to_dtype_mul_kernel", "linear_kernel"], launched


GEMMA = LLAMA.replace("transformers' LlamaRMSNorm (Qwen, Mistral and Phi-3 have the same), then a projection.",
                      "transformers' GemmaRMSNorm: the weight applied as 1 + w, computed after the norm.").replace(
    """        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        return self.proj(self.weight * hidden_states.to(input_dtype))""",
    """        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        return self.proj(hidden_states * (1.0 + self.weight.float()))""")


def test_a_weight_computed_after_the_norm_runs_before_it_and_the_product_fuses(cpu_verifier):
    """`1 + w` reads only a parameter: the norm's kernel computes it where it applies it (a
    "parameter" value, policy/recompute.py; session 30 ran it as a kernel of its own before the
    norm, and before that the product ran as a kernel of its own after both)."""
    assert "1.0 + self.weight.float()" in GEMMA
    _, result, _ = convert(cpu_verifier, textwrap.dedent(GEMMA), mode="strict")
    assert result.correct, failures(result)
    assert result.plan.split("; ")[0] == "to_dtype, rms_norm, mul: Triton", result.plan
    assert "add_scalar" not in result.plan


class ReturnsVariance(nn.Module):  # the variance is an output too: the five operators stay
    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + 1e-6), variance


def test_a_pattern_whose_part_the_module_returns_stays_as_written():
    found = ops(ReturnsVariance(), torch.randn(2, 4, 16))
    assert "rms_norm" not in found and "mean" in found


# -- attention ---------------------------------------------------------------------------------

EAGER_ATTENTION = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def repeat_kv(hidden_states, n_rep):
    batch, heads, slen, dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, heads, n_rep, slen, dim)
    return hidden_states.reshape(batch, heads * n_rep, slen, dim)


class Model(nn.Module):
    \"\"\"transformers' eager attention (Llama, Qwen, Mistral, Gemma): grouped-query heads repeated
    by repeat_kv, the scores scaled, an additive mask sliced to the keys, softmax in float32,
    dropout (a copy in eval), the weighted values.\"\"\"

    def __init__(self, hidden=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, hidden // heads
        self.scaling = self.dim ** -0.5
        self.q = nn.Linear(hidden, heads * self.dim, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.dim, bias=False)
        self.o = nn.Linear(heads * self.dim, hidden, bias=False)

    def forward(self, x, mask):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, -1, self.dim).transpose(1, 2)
        k = repeat_kv(self.k(x).view(b, t, -1, self.dim).transpose(1, 2), self.heads // self.kv_heads)
        v = repeat_kv(self.v(x).view(b, t, -1, self.dim).transpose(1, 2), self.heads // self.kv_heads)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=0.1, training=self.training)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o(out.reshape(b, t, -1))


def get_inputs():
    low = torch.finfo(torch.float32).min
    mask = torch.triu(torch.full((9, 9), low), 1)[None, None].repeat(2, 1, 1, 1)
    mask[1, :, 4] = low  # a row the mask hides entirely: uniform weights, as PyTorch computes them
    return [torch.randn(2, 9, 32), mask]


def get_init_inputs():
    return []
"""


def _eager_attention():
    ns: dict = {}
    exec(EAGER_ATTENTION, ns)
    return ns["Model"]().eval(), ns["get_inputs"]()


class BertAttention(nn.Module):  # divided by sqrt(d), a padding mask over the keys, dropout
    def forward(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-1, -2)) / 8 ** 0.5
        probs = nn.functional.dropout(torch.softmax(scores + mask, dim=-1), 0.1, training=False)
        return torch.matmul(probs, v)


class VitAttention(nn.Module):  # scaled, no mask
    def forward(self, q, k, v):
        return torch.softmax((q @ k.transpose(-1, -2)) * 0.25, dim=-1) @ v


class T5Attention(nn.Module):  # no scale; a position bias added
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(1, 2, 5, 7))

    def forward(self, q, k, v):
        return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(3, 2)) + self.bias, dim=-1), v)


class SwinAttention(nn.Module):  # the query scaled before the product, a bias added
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(1, 2, 5, 7))

    def forward(self, q, k, v):
        q = q * 8 ** -0.5
        return (q @ k.transpose(-2, -1) + self.bias).softmax(-1) @ v


class WeightsReturned(nn.Module):  # output_attentions: the weights are an output, so they stay
    def forward(self, q, k, v):
        w = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        return w @ v, w


class OverQueries(nn.Module):  # a softmax over the queries is not attention's
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2), dim=-2) @ v


class BooleanAdded(nn.Module):  # adding a boolean adds 0 or 1: not a mask that hides
    def forward(self, q, k, v, m):
        return torch.softmax(q @ k.transpose(-1, -2) + m, dim=-1) @ v


def _nodes(module, *inputs):
    return capture_module(module, list(inputs)).nodes


def test_hand_written_attention_becomes_one_operator():
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 6)
    cases = [(BertAttention(), (q, k, v, torch.randn(2, 1, 1, 7)), "masked_attention", 8 ** -0.5),
             (VitAttention(), (q, k, v), "scaled_dot_product_attention", 0.25),
             (T5Attention(), (q, k, v), "masked_attention", 1.0),
             (SwinAttention(), (q, k, v), "masked_attention", 8 ** -0.5)]
    for module, inputs, op, scale in cases:
        nodes = _nodes(module, *inputs)
        found = [n.op for n in nodes]
        assert found.count(op) == 1 and not {"matmul", "softmax", "add", "div_scalar", "mul_scalar"} & set(found), \
            (module, found)
        (node,) = [n for n in nodes if n.op == op]
        assert node.attrs["scale"] == pytest.approx(scale) and not node.attrs.get("enable_gqa")


def test_repeated_key_value_heads_are_read_in_place():
    model, inputs = _eager_attention()
    graph = capture_module(model, inputs)
    (attention,) = [n for n in graph.nodes if n.op == "masked_attention"]
    assert attention.attrs["enable_gqa"] and attention.kwargs["enable_gqa"]
    key, value = (graph.values[a["value"]].shape for a in attention.args[1:3])
    assert key == value == [2, 2, 9, 8]  # two key/value heads for four query heads, not a copy of four
    assert "aten.expand.default" not in {n.target for n in graph.nodes}
    assert not {"matmul", "softmax"} & {n.op for n in graph.nodes}


@pytest.mark.parametrize("module", [WeightsReturned(), OverQueries(), BooleanAdded()],
                         ids=["weights-returned", "over-queries", "boolean-added"])
def test_attention_patterns_that_differ_stay_as_written(module):
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 6)
    inputs = (q, k, v, torch.rand(5, 7) > 0.5) if isinstance(module, BooleanAdded) else (q, k, v)
    found = [n.op for n in _nodes(module, *inputs)]
    assert "softmax" in found and not {"scaled_dot_product_attention", "masked_attention"} & set(found), found


def test_eager_attention_converts_to_one_kernel_and_matches_the_module(cpu_verifier):
    """The eager attention, mask and grouped heads included, is one flash-attention kernel reading
    the key/value heads in place; a fully masked row's uniform weights come out as PyTorch's."""
    _, result, _ = convert(cpu_verifier, EAGER_ATTENTION, mode="strict")
    assert result.correct, failures(result)
    assert "masked_attention: Triton" in result.plan and "softmax" not in result.plan, result.plan
    forward = result.source.split("def forward")[1]
    assert forward.count("masked_attention_kernel[") == 1 and "_H // _k.shape[1]" in forward


def test_a_failing_pattern_matcher_leaves_the_graph_as_written(monkeypatch):
    import drtriton.recompose as recompose

    def broken(*args):
        raise IndexError("a matcher's bug")

    monkeypatch.setattr(recompose, "_attention", broken)
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 6)
    with pytest.warns(UserWarning, match="operator patterns left as written .IndexError: a matcher's bug"):
        found = [n.op for n in _nodes(VitAttention(), q, k, v)]
    assert "softmax" in found and found.count("matmul") == 2, found


class Nested(nn.Module):  # attention whose weights come from attention: the first found is fused
    def forward(self, a, b, c, d):
        return torch.softmax(torch.softmax(a @ b.mT, -1) @ c.mT, -1) @ d


class SelfRepeated(nn.Module):  # repeated heads read as query, key and value alike
    def forward(self, x):
        b, h, s, e = x.shape
        xr = x[:, :, None, :, :].expand(b, h, 2, s, e).reshape(b, h * 2, s, e)
        return nn.functional.scaled_dot_product_attention(xr, xr, xr)


class ScaledMaskFirst(nn.Module):  # the mask, itself scaled, is the add's first operand
    def forward(self, q, k, v, m):
        return torch.softmax((1.0 - m) * -10000.0 + q @ k.mT * 0.5, dim=-1) @ v


def test_nested_attention_keeps_every_value_it_reads():
    a, b, c, d = torch.randn(4, 8), torch.randn(5, 8), torch.randn(6, 5), torch.randn(6, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = capture_module(Nested(), [a, b, c, d])
    assert not [w for w in caught if "patterns left as written" in str(w.message)]  # not the guard's doing
    defined = set(graph.values)
    assert all(v in defined for n in graph.nodes for v in value_refs(n.args)), "a node reads a removed value"
    assert [n.op for n in graph.nodes].count("scaled_dot_product_attention") == 1


def test_only_the_key_and_value_heads_are_read_in_place():
    graph = capture_module(SelfRepeated(), [torch.randn(1, 2, 4, 8)])
    (node,) = [n for n in graph.nodes if n.op == "scaled_dot_product_attention"]
    q, k, v = (graph.values[a["value"]].shape for a in node.args[:3])
    assert node.attrs["enable_gqa"] and q == [1, 4, 4, 8] and k == v == [1, 2, 4, 8]


def test_a_mask_computed_by_a_scale_is_found_in_either_order():
    q, k, v, m = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 6), torch.rand(2, 1, 7)
    (node,) = [n for n in capture_module(ScaledMaskFirst(), [q, k, v, m]).nodes if n.op == "masked_attention"]
    assert node.attrs["scale"] == 0.5


def test_attention_stores_its_heads_merged_where_the_module_merges_them(cpu_verifier):
    """`out.transpose(1, 2).contiguous()` after attention: the kernel stores each head's rows in
    the (B, L, H, Dv) layout the next reshape reads, and no copy runs in forward; left to
    PyTorch (mixed mode), the same layout comes from its attention and a transpose."""
    from drtriton.policy.builtin import PYTORCH, BuiltinPolicy
    from drtriton.policy.program import Program
    from drtriton.problem import from_source

    model, inputs = _eager_attention()
    graph = capture_module(model, inputs)
    (attention,) = [n for n in graph.nodes if n.op == "masked_attention"]
    assert attention.attrs["heads_last"] and len(graph.values[attention.outputs[0]].shape) == 4
    assert not any(n.target in ("aten.clone.default", "aten.contiguous.default") for n in graph.nodes)
    _, result, _ = convert(cpu_verifier, EAGER_ATTENTION, mode="strict")
    assert result.correct, failures(result)
    assert "the heads merged as stored" in result.source and ".contiguous()\n" not in result.source
    # the attention as PyTorch's, the rest in Triton
    problem = from_source(EAGER_ATTENTION, name="eager_attention")
    program = Program(graph)
    policy = BuiltinPolicy("cpu")
    frags = policy.cuts(program)[0]
    cand = policy.assemble(problem, program, frags,
                           lambda i, f: PYTORCH if f.anchor is not None and f.anchor.op == "masked_attention" else 0,
                           "mixed")
    assert ".transpose(1, 2).contiguous()" in cand.source
    verdict = cpu_verifier.verify(problem, cand.source, mode="mixed")
    assert verdict.correct, verdict.summary
