"""Hand-written operator patterns put back as one vocabulary operator (`drtriton/recompose.py`):
RMS normalisation as Llama-style models and T5 write it becomes one `rms_norm` node, converts to
one kernel (with the casts and the weight fused around it) and computes what the module does;
where the pattern's inner values are read elsewhere, or the dims or dtype differ, it stays."""

import re
import textwrap

import pytest
import torch
import torch.nn as nn

from drtriton.capture import capture_module
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
    """`1 + w` reads only a parameter: it runs before the norm, whose kernel then applies it
    (before, the product ran as a kernel of its own after both)."""
    assert "1.0 + self.weight.float()" in GEMMA
    _, result, _ = convert(cpu_verifier, textwrap.dedent(GEMMA), mode="strict")
    assert result.correct, failures(result)
    assert result.plan.split("; ")[:2] == ["to_dtype, add_scalar: Triton", "to_dtype, rms_norm, mul: Triton"], result.plan


class ReturnsVariance(nn.Module):  # the variance is an output too: the five operators stay
    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + 1e-6), variance


def test_a_pattern_whose_part_the_module_returns_stays_as_written():
    found = ops(ReturnsVariance(), torch.randn(2, 4, 16))
    assert "rms_norm" not in found and "mean" in found
