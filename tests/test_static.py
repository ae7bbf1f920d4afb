"""Static checks: what each rule refuses, and that honest candidates pass untouched."""

import pytest

from drtriton.verify.static import check_source
from verifier_cases import HONEST, MATMUL_OK, RELU_KERNEL, src

CLASSES = ["ModelNew"]


@pytest.mark.parametrize("kind", sorted(HONEST))
def test_honest_candidates_have_no_findings(kind):
    report = check_source(HONEST[kind][1], CLASSES, "Model")
    assert report.ok, report.errors
    # a problem returning float16 is written with it: a finding of the problem's own dtype
    # (the verifier allows it), and no other
    own = {"torch.float16"} if kind == "float16_output" else set()
    assert report.kernels and {f.dtype for f in report.reduced_precision} == own


def forward(body: str, extra: str = "") -> str:
    return src(RELU_KERNEL + extra + "\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
               + "".join(f"        {line}\n" for line in body.strip().splitlines()))


REFUSED = {
    "os": ("import os\nreturn x", "imports os"),
    "subprocess from": ("from subprocess import run\nreturn x", "imports subprocess"),
    "socket": ("import socket\nreturn x", "network"),
    "ctypes": ("import ctypes\nreturn x", "native code"),
    "numpy": ("import numpy as np\nreturn x", "host-side compute"),
    "eval": ("return eval('x')", "calls eval()"),
    "open": ("open('/tmp/x', 'w')\nreturn x", "calls open()"),
    "dunder": ("return x.__class__", ".__class__"),
    "globals": ("return globals()['x']", "calls globals()"),
    "setattr": ("setattr(torch, 'relu', None)\nreturn x", "setattr()"),
    "torch.compile": ("return torch.compile(torch.relu)(x)", "torch.compile does the work"),
    "event": ("e = torch.cuda.Event()\nreturn x", "timing events"),
    "graph": ("g = torch.cuda.CUDAGraph()\nreturn x", "CUDA graphs"),
    "seed": ("torch.manual_seed(0)\nreturn x", "random state"),
    "tolist": ("return torch.tensor(x.tolist())", ".tolist"),
    "with suppress": ("import contextlib\nwith contextlib.suppress(Exception):\n    pass\nreturn x", "suppress"),
    "star import": ("from torch import *\nreturn x", "import *"),
    "precision flag": ("torch.backends.cuda.matmul.allow_tf32 = True\nreturn x", "patching"),
    "delete": ("del torch.nn.functional.relu\nreturn x", "patching"),
    "torch_function": ("return x", "__torch_function__"),
    "getattr private": ("return getattr(torch, '_C')._VariableFunctions.relu(x)", "._C"),
    "getattr computed": ("return getattr(torch, 'r' + 'elu')(x)", "computed name"),
    "getattr as attribute": ("return getattr(torch, 'compile')(torch.relu)(x)", "torch.compile does the work"),
    "_C through an alias": ("return torch.nn.functional.torch._C._nn.gelu(x)", "._C"),
    "getattr as a value": ("g = getattr\nreturn g(torch, '_' + 'C')", "passes getattr around"),
    "attrgetter": ("import operator\nreturn operator.attrgetter('_C')(torch)", "computed names"),
    # Triton's on-disk cache serves every check's compiles (and torch.compile's): nothing planted
    "triton cache": ("triton.runtime.cache.get_cache_manager('k').put(b'', 'k.cubin')\nreturn x",
                     "compiled-kernel cache"),
    "triton cache import": ("from triton.runtime.cache import get_cache_manager\nreturn x", "compiled-kernel cache"),
    "triton compiler": ("import triton.compiler\nreturn x", "Triton compiles the kernels itself"),
    # past where the verifier records launches (a compiled kernel's `run`) or while it does not
    "launcher": ("k = relu_kernel[(1,)](x, x, 1)\nk._run(1, 1, 1, 0, k.function, k.packed_metadata, None, None, None, x)\n"
                 "return x", "._run"),
    "launcher class": ("triton.runtime.driver.active.launcher_cls\nreturn x", ".launcher_cls"),
    "benchmarking": ("relu_kernel._bench(x, config=None)\nreturn x", "._bench"),
}


def test_getattr_on_self_and_with_plain_names_is_fine():
    body = "w = getattr(self, 'weight', None)\nk = getattr(self, 'k' + '1', 0)\nreturn getattr(torch, 'relu')(x)"
    report = check_source(forward(body), CLASSES, "Model")
    assert report.ok, [str(f) for f in report.errors]


# the user's own code, copied whole into the candidate (the builtin policy keeps the constructor
# and the module's top level so the module is a drop-in replacement): attributes by computed names
USER_OWN = """
ACTS = {name: getattr(nn, name) for name in ("ReLU", "GELU")}


class Model(nn.Module):
    def __init__(self, act="ReLU", **overrides):
        super().__init__()
        self.act = getattr(nn, act)()
        for k, v in overrides.items():
            setattr(self.act, k, v)

    def forward(self, x):
        return self.act(x)
"""


def test_the_problem_s_own_constructor_and_top_level_may_use_computed_names():
    problem = src(USER_OWN)
    candidate = src(RELU_KERNEL + USER_OWN.replace("class Model(", "class ModelNew("))
    report = check_source(candidate, CLASSES, "Model", problem)
    assert report.ok, [str(f) for f in report.errors]
    # without the problem's source, or in code of the candidate's own, the same lines are refused
    assert len(check_source(candidate, CLASSES, "Model").errors) == 3
    own_line = "        for k, v in overrides.items():\n            setattr(self.act, k, v)\n"
    edited = candidate.replace(own_line, own_line + "        setattr(torch, 'relu', None)\n")
    messages = [f.message for f in check_source(edited, CLASSES, "Model", problem).errors]
    assert any("setattr()" in m for m in messages), messages  # the constructor is no longer the user's
    lone = forward("return getattr(torch, 'r' + 'elu')(x)")
    assert not check_source(lone, CLASSES, "Model", problem + "\ngetattr(torch, 'r' + 'elu')(x)\n").ok  # a line alone is not a unit


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_rule_refuses(name):
    body, fragment = REFUSED[name]
    extra = ""
    if name == "torch_function":
        extra = "\nclass Sneaky:\n    def __torch_function__(self, *a):\n        pass\n"
    report = check_source(forward(body, extra), CLASSES, "Model")
    assert not report.ok
    assert any(fragment in f.message for f in report.errors), [str(f) for f in report.errors]


def test_missing_class_and_kernel_are_reported_together():
    report = check_source("import torch\nx = 1\n", ["FooTriton", "ModelNew"], "Foo")
    messages = [f.message for f in report.errors]
    assert "defines no candidate class (expected FooTriton or ModelNew)" in messages
    assert "defines no @triton.jit kernel" in messages


def test_accepts_the_user_class_name():
    source = HONEST["elementwise"][1].replace("class ModelNew", "class ReluTriton")
    report = check_source(source, ["ReluTriton", "ModelNew"], "Relu")
    assert report.ok and report.candidate_class == "ReluTriton"


def test_precision_findings():
    tf32 = check_source(MATMUL_OK.replace(', input_precision="ieee"', ""), CLASSES, "Model")
    assert tf32.ok and "TF32" in tf32.reduced_precision[0].message
    tf32x3 = check_source(MATMUL_OK.replace('"ieee"', '"tf32x3"'), CLASSES, "Model")
    assert not tf32x3.reduced_precision
    half = check_source(forward("return x.to(torch.float16)"), CLASSES, "Model")
    assert half.reduced_precision


def test_autotuned_kernels_count_and_need_jit():
    autotuned = src("""
@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass

class ModelNew(nn.Module):
    def forward(self, x):
        return x
""")
    assert check_source(autotuned, CLASSES).kernels == ["k"]
    no_jit = autotuned.replace("@triton.jit\n", "")
    report = check_source(no_jit, CLASSES)
    assert any("not decorated with @triton.jit" in f.message for f in report.errors)


def test_syntax_error():
    report = check_source("def (:", CLASSES)
    assert report.errors[0].message.startswith("syntax error")
