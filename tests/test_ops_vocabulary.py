"""The vocabulary's registry, records and capture data."""

from __future__ import annotations

import importlib
import random
import re
import subprocess
import sys

import pytest

from drtriton import ops
from drtriton.ops.layout import LAYOUT
from drtriton.ops.shape import ConcreteContext, ShapeError

OPS = list(ops.VOCABULARY.values())


def test_registry_shape():
    # KernelBench's 67, then Core ATen's elementwise math and what OpInfo showed missing (special
    # functions, linear algebra): a few hundred, not thousands (one record per operator, not per overload)
    assert 90 <= len(ops.VOCABULARY) <= 300
    assert ops.CATEGORIES == ("elementwise_unary", "elementwise_binary", "matmul", "conv", "pool", "norm",
                              "softmax", "reduction", "scan", "sort", "loss", "indexing", "recurrent",
                              "factorization")
    for category in ops.CATEGORIES:
        assert ops.by_category(category), category
    for name, op in ops.VOCABULARY.items():
        assert name == op.name and re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert op.arity == len(op.slots) >= 1
        assert op.description
    # the ordering groups categories in CATEGORIES order
    order = [ops.CATEGORIES.index(op.category) for op in OPS]
    assert order == sorted(order)


def test_get_lists_valid_names():
    assert ops.get("conv2d").category == "conv"
    with pytest.raises(KeyError) as info:
        ops.get("conv4d")
    assert "conv4d" in str(info.value) and "conv2d" in str(info.value) and "relu" in str(info.value)
    with pytest.raises(KeyError, match="valid"):
        ops.by_category("nope")


def test_import_is_light():
    """The language server and the built-in policy import the vocabulary: no torch, no OR-Tools."""
    code = ("import sys, drtriton.ops; heavy = [m for m in ('torch', 'ortools', 'triton', 'numpy') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _sample(op, seed=0):
    rng = random.Random(seed)
    known: dict[int, int] = {}
    for slot in range(op.arity):
        known[slot] = rng.choice(op.rank_options(slot, known))
    ranks = [known[s] for s in range(op.arity)]
    attrs = op.sample_attrs(rng, ranks)
    for p in op.params:  # placeholders for what the solver would choose (an int serves every axis)
        attrs[p.name] = 1
    return ranks, attrs


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_record_is_complete(op):
    ranks, attrs = _sample(op)
    expr = op.torch_expr([f"a{i}" for i in range(op.arity)], attrs, "m0" if op.has_module else None)
    assert "{" not in expr and all(f"a{i}" in expr for i in range(op.arity)), expr
    assert ("self.m0(" in expr) == op.has_module
    if op.has_module:
        with pytest.raises(ValueError, match="module_attr"):
            op.torch_expr([f"a{i}" for i in range(op.arity)], attrs)
    elementwise = op.category.startswith("elementwise")
    assert (op.triton_template is not None) == elementwise
    if elementwise:
        text = op.triton_expr(attrs)
        assert "libdevice" not in text and "tl.extra" not in text and "tl.math.tanh" not in text
        # tl functions the interpreter and Triton 3.6/3.7 both have (and ranges.py's NumPy shim)
        # (and the dtypes casts name, float64 for functions evaluated in it)
        assert set(re.findall(r"\btl\.(\w+)", text)) <= {"exp", "log", "abs", "erf", "where", "maximum", "minimum",
                                                          "sqrt", "sin", "cos", "floor", "ceil", "float32", "float64",
                                                          "int32", "PropagateNan"}
        assert set(re.findall(r"\{(\w+)\}", text)) <= {"x", "y", "z"}
    for spec in op.attrs:
        assert spec.describe()
    assert op.torch_functions or op.module_types or op.tensor_methods, "capture needs a way to recognise the op"


@pytest.mark.parametrize("op", [op for op in OPS if op.params], ids=lambda op: op.name)
def test_declared_params_are_the_ones_the_rule_asks_for(op):
    for seed in range(5):
        ranks, attrs = _sample(op, seed)
        attrs = {k: v for k, v in attrs.items() if k not in {p.name for p in op.params}}
        asked: set[str] = set()
        ctx = ConcreteContext(attrs, lambda name, index, lo, hi, asked=asked: asked.add(name) or 2)
        try:
            op.rule(ctx, [[8] * r for r in ranks], attrs)
        except ShapeError:
            pass
        assert asked <= {p.name for p in op.params}
    assert all(p.doc for p in op.params)


def _resolve(qualname: str):
    module, _, attr = qualname.rpartition(".")
    obj = importlib.import_module(module)
    return getattr(obj, attr)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_capture_names_exist(op):
    torch = pytest.importorskip("torch")
    for name in op.torch_functions:
        assert callable(_resolve(name)), name
    for name in op.module_types:
        assert issubclass(_resolve(name), torch.nn.Module), name
    for name in op.tensor_methods:
        assert hasattr(torch.Tensor, name), name


@pytest.mark.parametrize("op", [op for op in OPS if op.has_module], ids=lambda op: op.name)
def test_module_form_builds_and_names_parameters_like_kernelbench(op):
    torch = pytest.importorskip("torch")
    for seed in range(20):
        ranks, attrs = _sample(op, seed)
        attrs = {**attrs, "out_channels": 4, "out_features": 3, "groups": 1, "num_groups": 2,
                 "padding": 1, "output_padding": 0}
        shapes = [[4] * r for r in ranks]
        try:
            shape = op.output_shape(shapes, attrs)
        except ShapeError:
            continue
        module = op.build_module(attrs, shapes)
        assert op.module_expr(attrs, shapes).startswith("nn.")
        # nn.Linear's and nn.Conv's names; recurrent layers name theirs per layer and direction
        assert all(n in ("weight", "bias") or (op.category == "recurrent" and
                                               re.fullmatch(r"(weight|bias)_(ih|hh)_l\d+(_reverse)?", n))
                   for n, _ in module.named_parameters())
        out = op.reference([torch.randn(*s) for s in shapes], attrs, module)
        assert tuple(out.shape) == shape
        named = op.module_expr(attrs, shapes, [f"arg{i}" for i in range(len(op.module_call(attrs, shapes).args))])
        assert "arg0" in named
        return
    pytest.fail("no accepted case drawn")


def test_layout_glue():
    flatten, unsqueeze = LAYOUT["flatten"], LAYOUT["unsqueeze"]
    ctx = ConcreteContext({})
    assert flatten.rule(ctx, [2, 3, 4, 5], {"start_dim": 2}) == [2, 3, 20]
    assert unsqueeze.rule(ctx, [3], {"count": 2}) == [1, 1, 3]
    assert flatten.apply("v1", {"start_dim": 2}) == "v1.flatten(2)"
    assert "to_float" in LAYOUT and not set(LAYOUT) & set(ops.VOCABULARY)


def test_triton_templates_take_traced_attributes():
    """Traced programs carry attribute values synthesis never draws (the built-in policy uses
    the templates on them): an absent clamp bound, a fractional power."""
    assert ops.get("clamp").triton_expr({"min": 0.0, "max": None}) == "tl.maximum({x}, 0.0, propagate_nan=tl.PropagateNan.ALL)"
    assert ops.get("pow").triton_expr({"exponent": 3}) == "{x} * {x} * {x}"
    assert ops.get("pow").triton_expr({"exponent": 0.5}) == "tl.exp(0.5 * tl.log({x}))"
    assert ops.get("gelu").triton_expr({}) == ops.get("gelu").triton_expr({"approximate": "none"})


def test_the_range_shim_reads_bit_casts_as_triton_does():
    """ranges.py evaluates templates with NumPy (float64 samples): a bit cast reads the float32
    bits, as the kernel does (nextafter steps x's bits as an integer)."""
    import numpy as np
    import torch

    from drtriton.ops import ranges

    x, y = np.array([1.0, 0.0, -2.0, 3.0, -0.5]), np.array([2.0, -1.0, 0.0, 3.0, -7.0])
    got = ranges.evaluate(ops.VOCABULARY["nextafter"].triton_expr({}), x, y)
    want = torch.nextafter(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32))
    assert np.array_equal(got, want.double().numpy())
