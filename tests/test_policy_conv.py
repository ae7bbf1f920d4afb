"""The built-in policy's convolution emitter (drtriton/policy/emit/conv.py), end to end on CPU:
capture -> plan -> generated module -> the strict verifier, in the Triton interpreter.

Shapes are tiny (the interpreter pays per loop step); every case is checked by the verifier
against PyTorch on fresh inputs, so a wrong index, mask or output size fails it."""

from __future__ import annotations

import json
import re

import pytest
import torch

from drtriton.capture import capture_module
from drtriton.policy.builtin import BuiltinPolicy
from drtriton.policy.emit import Names, conv
from drtriton.policy.program import Program
from drtriton.problem import from_source

MODULE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{cls}({args})

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''


def _graph(problem):
    ns: dict = {}
    exec(problem.source, ns)
    with torch.device("meta"):
        model = ns[problem.class_name](*(ns[problem.init_inputs_fn]() if problem.init_inputs_fn else []))
        inputs = list(ns[problem.inputs_fn]())
    return capture_module(model, inputs)


def _first_candidate(problem):
    return next(BuiltinPolicy("cpu").candidates(problem, _graph(problem), "strict"))


def _check(verifier, problem, plan: str):
    cand = _first_candidate(problem)
    assert cand.description == plan, cand.description
    assert "torch.ops.aten" not in cand.source  # the convolution itself is Triton
    verdict = verifier.verify(problem, cand.source)
    assert verdict.correct, (verdict.summary, cand.source)


# (module class, constructor arguments, input shape): per op, the attribute patterns KernelBench
# uses (stride, padding, dilation, groups, depthwise, asymmetric kernels and inputs, no bias,
# output padding), some together.
CASES = {
    "conv1d": [
        ("Conv1d", "4, 6, 3", "2, 4, 11"),
        ("Conv1d", "4, 6, 3, stride=3, padding=2, dilation=4, bias=False", "2, 4, 23"),
        ("Conv1d", "6, 6, 5, groups=6, padding=1", "2, 6, 13"),  # depthwise
        ("Conv1d", "16, 6, 5, padding=2", "2, 16, 13"),  # taps outer (16 input channels)
    ],
    "conv2d": [
        ("Conv2d", "4, 8, (3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2", "2, 4, 11, 9"),
        ("Conv2d", "3, 8, 5, stride=4, padding=2", "2, 3, 19, 17"),  # AlexNet-like, stride 4
        ("Conv2d", "4, 6, 1, bias=False", "2, 4, 5, 7"),  # pointwise
        ("Conv2d", "8, 8, (3, 1), groups=8, bias=False", "2, 8, 9, 7"),  # depthwise, asymmetric
        ("Conv2d", "4, 8, 3, groups=4, stride=2, padding=1", "2, 4, 9, 7"),  # depthwise, 2 outputs each
        # taps outer, channels inner (16 or more input channels per group): grouped, strided,
        # dilated, padded; and a 1x1 convolution that reads its own positions
        ("Conv2d", "40, 8, 3, stride=2, padding=1, dilation=2, groups=2", "2, 40, 9, 7"),
        ("Conv2d", "24, 6, 1, bias=False", "2, 24, 5, 7"),
        ("Conv2d", "32, 8, 1, stride=2, groups=2", "2, 32, 5, 7"),
        ("Conv2d", "16, 6, 1, padding=1", "2, 16, 4, 5"),  # 1x1 reading the padding around x
        ("Conv2d", "16, 6, 3, padding=1", "16, 5, 4"),  # unbatched, taps outer
        ("Conv2d", "4, 8, 3, groups=4, padding=2, dilation=2", "2, 4, 7, 6"),  # depthwise x2, bias
    ],
    "conv3d": [
        ("Conv3d", "3, 5, (3, 2, 1), stride=(1, 2, 1), padding=(1, 0, 1), bias=False", "2, 3, 6, 7, 5"),
        ("Conv3d", "4, 4, 3, groups=4, padding=1, dilation=(1, 2, 1)", "1, 4, 5, 6, 5"),  # depthwise
        ("Conv3d", "16, 4, (3, 1, 2), padding=(1, 0, 1)", "2, 16, 4, 3, 5"),  # taps outer
    ],
    "conv_transpose1d": [
        ("ConvTranspose1d", "4, 6, 3", "2, 4, 7"),
        ("ConvTranspose1d", "4, 6, 3, stride=2, padding=1, output_padding=1, dilation=2", "2, 4, 7"),
        ("ConvTranspose1d", "4, 4, 3, stride=3, groups=4, bias=False", "2, 4, 5"),  # depthwise
    ],
    "conv_transpose2d": [
        ("ConvTranspose2d", "4, 8, 3, stride=2, padding=1, output_padding=1", "2, 4, 5, 6"),
        ("ConvTranspose2d", "4, 8, (3, 5), stride=(2, 3), padding=(1, 2), dilation=(2, 1), groups=2, bias=False",
         "2, 4, 5, 6"),
        ("ConvTranspose2d", "4, 6, 3, stride=(2, 4), padding=(2, 1), dilation=(4, 6), output_padding=(3, 1)",
         "1, 4, 3, 4"),  # gcd(stride, dilation) > 1: some residue classes get no tap at all
        ("ConvTranspose2d", "4, 8, (3, 7), padding=(1, 3), bias=False", "1, 4, 5, 6"),
        # taps outer with residue classes (a tap count per class), grouped; a transposed 1x1
        ("ConvTranspose2d", "32, 8, 3, stride=2, padding=1, output_padding=1, groups=2", "2, 32, 4, 5"),
        ("ConvTranspose2d", "20, 6, 1, stride=2, bias=False", "2, 20, 3, 4"),
        # gcd(stride, dilation) > 1 with taps outer: classes no tap reaches
        ("ConvTranspose2d", "16, 4, 3, stride=2, padding=1, dilation=2, output_padding=1", "2, 16, 3, 4"),
        # the kernel's tile count must be the grid's: 128 positions per class per image (one CPU tile),
        # which (OH + 1) // 2 * (OW + 1) // 2 read as one product miscounts as 136 (two)
        ("ConvTranspose2d", "16, 8, 3, stride=2, padding=1, output_padding=1", "2, 16, 16, 8"),
    ],
    "conv_transpose3d": [
        ("ConvTranspose3d", "4, 6, 3, stride=2, padding=1, output_padding=1", "1, 4, 3, 4, 3"),
        ("ConvTranspose3d", "4, 8, (3, 5, 1), stride=(2, 1, 2), padding=(1, 2, 0), groups=2, "
         "output_padding=(1, 0, 1), bias=False", "1, 4, 3, 4, 3"),
    ],
}


@pytest.mark.parametrize("op, cls, args, shape", [(op, *case) for op, cases in CASES.items() for case in cases],
                         ids=[f"{op}-{i}" for op, cases in CASES.items() for i in range(len(cases))])
def test_convolution_is_correct(cpu_verifier, op, cls, args, shape):
    problem = from_source(MODULE.format(cls=cls, args=args, shape=shape), name=f"{op} {args}")
    groups = re.search(r"groups=(\d+)", args)
    depthwise = groups is not None and groups[1] == args.split(",")[0]  # groups == in_channels
    how = "method=direct" if depthwise else "precision=ieee"
    _check(cpu_verifier, problem, f"{op}: Triton ({how})")


def test_unbatched_input(cpu_verifier):
    problem = from_source(MODULE.format(cls="ConvTranspose2d", args="4, 6, 3, stride=2", shape="4, 3, 5"),
                          name="unbatched")
    _check(cpu_verifier, problem, "conv_transpose2d: Triton (precision=ieee)")


FUSED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level 2, problem 1 (Conv2D_ReLU_BiasAdd), at a tiny size."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x


def get_inputs():
    return [torch.randn(2, 4, 9, 10)]


def get_init_inputs():
    return [4, 8, 3, (8, 1, 1)]
'''

CONSTANT_TENSOR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level 2, problem 31 (Conv2d_Min_Add_Multiply), at a tiny size: forward makes
    a tensor of a constant, which torch.export traces as lift_fresh_copy + detach_."""

    def __init__(self, in_channels, out_channels, kernel_size, constant_value, bias_shape, scaling_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.constant_value = constant_value
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, torch.tensor(self.constant_value))
        x = x + self.bias
        x = x * self.scaling_factor
        return x


def get_inputs():
    return [torch.rand(2, 3, 9, 10)]


def get_init_inputs():
    return [3, 8, 3, 0.5, (8, 1, 1), 2.0]
'''

TWO_OUTPUTS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x, y):
        a = self.conv(x)
        return torch.sigmoid(a) * y, a


def get_inputs():
    return [torch.randn(2, 4, 3, 4, 3), torch.randn(2, 6, 6, 8, 6)]


def get_init_inputs():
    return []
'''


def test_epilogue_fused_into_the_conv_kernel(cpu_verifier):
    problem = from_source(FUSED, name="conv2d relu bias")
    _check(cpu_verifier, problem, "conv2d, relu, add: Triton (precision=ieee)")
    source = _first_candidate(problem).source
    assert source.count("@triton.jit") == 1  # one kernel: conv, relu and the (C, 1, 1) add
    assert "tl.maximum(acc, 0.0, propagate_nan=tl.PropagateNan.ALL)" in source


PER_CHANNEL_AND_IMAGE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d({cin}, {cout}, {k}, padding={k} // 2, groups={groups})
        self.scale = nn.Parameter(torch.randn({cout}, 1, 1))

    def forward(self, x, y):
        return torch.relu(self.conv(x) * self.scale + y)


def get_inputs():
    return [torch.randn(3, {cin}, 6, 7), torch.randn(3, 1, 1, 1)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("cin, cout, k, groups, plan", [
    (8, 8, 3, 8, "conv2d, mul, add, relu: Triton (method=direct)"),
    (16, 8, 1, 1, "conv2d, mul, add, relu: Triton (precision=ieee)"),
])
def test_epilogue_reads_per_channel_and_per_image_operands(cpu_verifier, cin, cout, k, groups, plan):
    """The image (and a depthwise plane's channel) is one value per program: an epilogue operand
    that varies only along them is a scalar load, one along the channels a row of the tile."""
    problem = from_source(PER_CHANNEL_AND_IMAGE.format(cin=cin, cout=cout, k=k, groups=groups), name=plan)
    _check(cpu_verifier, problem, plan)
    source = _first_candidate(problem).source
    assert source.count("@triton.jit") == 1
    assert re.search(r"y_val = tl\.load\(y_ptr \+ n\.to\(tl\.int64\) \* y_s0\)", source), source  # one scalar per program, 64-bit


ALONG_POSITIONS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d({cin}, {cout}, 3, padding=1, groups={groups})

    def forward(self, x, y, z):
        return torch.relu(self.conv(x) + y) * z


def get_inputs():
    return [torch.randn(2, {cin}, 5, 6), torch.randn(2, 1, 5, 6), torch.randn({cout}, 1, 6)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("cin, cout, groups, how", [(16, 8, 1, "precision=ieee"), (6, 6, 6, "method=direct")])
def test_epilogue_operands_broadcast_along_positions(cpu_verifier, cin, cout, groups, how):
    """Operands of shape (N, 1, H, W) and (C, 1, W): read along the tile's positions."""
    problem = from_source(ALONG_POSITIONS.format(cin=cin, cout=cout, groups=groups), name=how)
    _check(cpu_verifier, problem, f"conv2d, add, relu, mul: Triton ({how})")


def test_a_constant_tensor_made_in_forward_is_a_literal(cpu_verifier):
    problem = from_source(CONSTANT_TENSOR, name="conv2d min(constant tensor) add mul")
    assert [n.target for n in _graph(problem).nodes] == [
        "aten.conv2d.default", "aten.min.other", "aten.add.Tensor", "aten.mul.Tensor"]
    _check(cpu_verifier, problem, "conv2d, minimum, add, mul_scalar: Triton (precision=ieee)")
    assert "tl.minimum(acc, 0.5, propagate_nan=tl.PropagateNan.ALL)" in _first_candidate(problem).source


def test_epilogue_stores_every_value_used_outside(cpu_verifier):
    problem = from_source(TWO_OUTPUTS, name="conv_transpose3d with two outputs")
    _check(cpu_verifier, problem, "conv_transpose3d, sigmoid, mul: Triton (precision=ieee)")
    assert _first_candidate(problem).source.count("tl.store(") == 2


def test_precision_variants():
    problem = from_source(FUSED, name="variants")
    plans = [c.description for c in BuiltinPolicy("cpu").candidates(problem, _graph(problem), "strict")]
    assert plans[:2] == ["conv2d, relu, add: Triton (precision=ieee)", "conv2d, relu, add: Triton (precision=tf32x3)"]


def test_library_variant_in_mixed_mode(cpu_verifier):
    """Mixed mode adds "cuDNN convolution, Triton epilogue": first on the GPU, last on the CPU,
    never in strict mode; the plan it makes is correct."""
    problem = from_source(FUSED, name="library")
    graph = _graph(problem)
    plans = {(device, mode): [c.description for c in BuiltinPolicy(device).candidates(problem, graph, mode)]
             for device in ("cpu", "cuda") for mode in ("strict", "mixed")}
    library = "conv2d: PyTorch; relu, add: Triton"
    assert plans["cuda", "mixed"][0] == library
    assert plans["cpu", "mixed"][:3] == plans["cpu", "strict"][:2] + [library]  # after ieee, tf32x3
    assert all(library not in p for p in plans["cpu", "strict"] + plans["cuda", "strict"])
    assert plans["cuda", "strict"][0] == "conv2d, relu, add: Triton (precision=tf32x3)"
    cand = [c for c in BuiltinPolicy("cpu").candidates(problem, graph, "mixed") if c.description == library][0]
    assert cand.pytorch_compute and "@triton.jit" in cand.source
    assert cpu_verifier.verify(problem, cand.source, mode="mixed").correct
    assert not cpu_verifier.verify(problem, cand.source, mode="strict").correct


def test_every_kernelbench_convolution_emits(kernelbench_dir):
    """Every conv fragment of KernelBench levels 1 and 2 (captured on the meta device) gets a
    kernel for every variant, on the GPU (autotuned) and off it."""
    seen = set()
    for level in (1, 2):
        for line in (kernelbench_dir / f"level{level}.jsonl").read_text().splitlines():
            entry = json.loads(line)
            if "nn.Conv" not in entry["code"]:
                continue
            program = Program(_graph(from_source(entry["code"], name=entry["name"])))
            for frag in program.fragments():
                if frag.kind != "conv":
                    continue
                for config in conv.configs(program, frag):
                    for device in ("cuda", "cpu"):
                        emitted = conv.emit(program, frag, config, Names(), device=device)
                        compile("\n\n".join(emitted.kernels), "kernel", "exec")
                        compile("\n".join(emitted.lines), "launcher", "exec")
                seen.add((level, entry["problem_id"]))
    assert len(seen) == 98  # 35 problems of level 1, 63 of level 2
