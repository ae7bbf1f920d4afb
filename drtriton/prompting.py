"""The prompt format: one module for inference and training, so a model sees at inference
exactly what it was trained on.

A conversation is: the instruction (system), a worked example (user: a PyTorch program;
assistant: its Triton module), the program or fragment to convert (user), and, in later rounds,
the previous attempt (assistant) followed by the verifier's feedback on it (user). `parse_reply`
takes the code back out of a reply.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

SYSTEM = """You are an expert GPU kernel engineer. You rewrite PyTorch modules as Triton kernels \
that compute exactly the same function, faster.

Rules for your answer:
- Reply with one complete Python file in a ```python block: imports, @triton.jit kernels, and \
the module class named as asked, with the same constructor arguments and forward arguments as \
the original, and the same parameter names (so state_dict loads).
- All computation in forward runs in your Triton kernels. PyTorch may only allocate outputs \
(torch.empty...), make views (view, reshape, permute, expand) and copies (contiguous).
- Keep fp32 accuracy on fp32 inputs: tl.dot(a, b, input_precision="ieee") or "tf32x3"; no \
fp16/bf16 casts, no TF32.
- No try/except, no fallbacks to PyTorch, no use of the original class, no threads, streams, \
files, network, subprocesses, numpy, torch.compile or patching of torch.
- Write every output element; do not modify the inputs."""

EXAMPLE_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.relu(x + self.bias)


def get_inputs():
    return [torch.randn(128, 512)]


def get_init_inputs():
    return [512]
'''

EXAMPLE_ANSWER = '''```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    # one pass: load x and the row-broadcast bias, add, clamp at zero, store
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % cols, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        bias_relu_kernel[(triton.cdiv(n, 1024),)](x, self.bias, out, n, x.shape[-1], BLOCK=1024)
        return out
```'''


def task_message(problem_source: str, candidate_class: str, mode: str = "strict") -> str:
    extra = ("" if mode == "strict" else
             "\nMixed mode: you may call PyTorch library operators (e.g. convolutions) where Triton "
             "would be slower, as long as Triton kernels do the rest.")
    return (f"Convert this PyTorch program to Triton. Name the new class {candidate_class}.{extra}\n\n"
            f"```python\n{problem_source.strip()}\n```")


def feedback_message(verdict) -> str:
    """What the verifier said about the previous attempt, as a model should read it."""
    lines = [f"The verifier checked your module: {verdict.status}."]
    for reason in verdict.reasons[:4]:
        lines.append(f"- {reason}")
    failed = [t for t in verdict.trials if not t.passed]
    for t in failed[:2]:
        if t.max_abs_error is not None:
            lines.append(f"- trial {t.index + 1}: max abs error {t.max_abs_error:.3g}, relative error "
                         f"norm {t.rel_error_norm:.3g}, {t.mismatched} of {t.total} elements out of tolerance")
    if verdict.pytorch_ops:
        lines.append("- PyTorch ops in forward: " + ", ".join(sorted(verdict.pytorch_ops)))
    if verdict.correct:
        if verdict.timings:
            t = verdict.timings
            lines.append(f"- correct; {t.candidate.median_ms:.4f} ms vs eager {t.eager.median_ms:.4f} ms"
                         + (f", torch.compile {t.compiled.median_ms:.4f} ms" if t.compiled else ""))
        lines.append("Make it faster while keeping it correct.")
    else:
        lines.append("Fix it and reply with the whole corrected file.")
    return "\n".join(lines)


def build_messages(problem_source: str, candidate_class: str, mode: str = "strict",
                   history: list[tuple[str, object]] = ()) -> list[dict]:
    """The chat for one conversion; `history` holds (previous reply, its verdict) pairs."""
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task_message(EXAMPLE_PROBLEM, "ModelNew", mode)},
        {"role": "assistant", "content": EXAMPLE_ANSWER},
        {"role": "user", "content": task_message(problem_source, candidate_class, mode)},
    ]
    for reply, verdict in history:
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": feedback_message(verdict)})
    return messages


@dataclass
class Parsed:
    code: str | None
    error: str | None  # why there is no usable code

    @property
    def ok(self) -> bool:
        return self.code is not None and self.error is None


_FENCE = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def parse_reply(text: str, candidate_class: str) -> Parsed:
    """The Python file in a reply: the fenced block that defines the class (the last one when
    several do), else the reply from its first import on; with why, when there is none."""
    if not text or not text.strip():
        return Parsed(None, "the reply is empty")
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)  # reasoning models
    blocks = [b for b in _FENCE.findall(text) if b.strip()]
    if not blocks:
        m = re.search(r"^(import |from )", text, re.M)
        if m is None:
            return Parsed(None, "the reply contains no code")
        blocks = [text[m.start():]]
    defining = [b for b in blocks if re.search(rf"class\s+{re.escape(candidate_class)}\b", b)]
    code = (defining or blocks)[-1].strip() + "\n"
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return Parsed(code, f"the code does not parse: line {e.lineno}: {e.msg}")
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    if candidate_class not in classes:
        found = f" (it defines {', '.join(classes)})" if classes else ""
        return Parsed(code, f"the code does not define class {candidate_class}{found}")
    return Parsed(code, None)
