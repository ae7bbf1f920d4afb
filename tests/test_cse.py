"""Repeated subexpressions of a generated kernel are named once (drtriton/policy/cse.py): the
kernel computes the same, effects and constexpr-only expressions are never merged, names never
clash, and an arctangent module is a page, not 34 KB."""

from __future__ import annotations

import math
import types

import torch

from drtriton.capture import capture_module
from drtriton.policy.builtin import BuiltinPolicy
from drtriton.policy.cse import name_common_subexpressions
from drtriton.problem import from_source

KERNEL = '''def k(x_ptr, out, n, BLOCK: tl.constexpr):
    x = tl.load(x_ptr)
    y_0 = 2.0
    y = tl.where(tl.abs(x) > 1.0, 1.0 / tl.abs(x), tl.abs(x)) * tl.where(tl.abs(x) > 1.0, 1.0 / tl.abs(x),
        tl.abs(x)) + y_0
    tl.store(out, y)
'''


def _fake_tl(stores: list):
    """Enough of triton.language, on Python floats, to run a kernel body as plain Python."""
    return types.SimpleNamespace(load=lambda p: p, store=lambda p, v: stores.append(v), abs=abs,
                                 where=lambda c, a, b: a if c else b, sqrt=math.sqrt, constexpr=int)


def _run(source: str, x: float) -> list:
    stores: list = []
    ns = {"tl": _fake_tl(stores)}
    exec(source, ns)
    ns["k"](x, None, 1, 4)
    return stores


def test_repeats_become_locals_and_compute_the_same():
    out = name_common_subexpressions(KERNEL)
    lines = out.splitlines()
    # |x| and the whole where() are named; the taken name y_0 is skipped; the where's inner
    # `|x| > 1.0` appears once the where is named, so it stays inline
    assert "    y_1 = tl.abs(x)" in lines
    assert "    y_2 = tl.where(y_1 > 1.0, 1.0 / y_1, y_1)" in lines
    assert "    y = y_2 * y_2 + y_0" in lines
    assert out.count("tl.abs(") == 1
    for x in (-3.0, -0.5, 0.25, 4.0):
        assert _run(out, x) == _run(KERNEL, x)


def test_effects_branches_and_constexpr_are_left_alone():
    source = '''def k(x_ptr, out, BLOCK: tl.constexpr):
    tl.store(out, tl.store(out, 1.0))
    z = tl.arange(0, BLOCK // 2) + tl.arange(0, BLOCK // 2)
    w = (tl.abs(x_ptr) if BLOCK else 0) + (tl.abs(x_ptr) if BLOCK else 0)
    a = 1; b = tl.abs(x_ptr) + tl.abs(x_ptr)
'''
    assert name_common_subexpressions(source) == source


def test_blocks_and_comments_keep_their_place():
    source = '''def k(x, out, WIDE: tl.constexpr):
    # a comment stays
    if WIDE:
        y = tl.exp(x * x) + tl.exp(x * x)  # so does the statement's indentation
    else:
        y = x
    tl.store(out, y)
'''
    out = name_common_subexpressions(source)
    assert out.splitlines()[1:5] == ["    # a comment stays", "    if WIDE:", "        y_0 = tl.exp(x * x)",
                                     "        y = y_0 + y_0"]


def test_not_a_single_function_is_returned_as_it_is():
    for text in ("def broken(:\n", "x = 1\n", "import torch\n\ndef f():\n    return 1\n"):
        assert name_common_subexpressions(text) == text


ATAN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.atan(x)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''


def test_generated_arctangent_is_short_and_imports_only_what_it_uses():
    problem = from_source(ATAN, name="atan")
    ns: dict = {}
    exec(problem.source, ns)
    with torch.device("meta"):
        graph = capture_module(ns["Model"](), list(ns["get_inputs"]()))
    # (without _DirectLaunch: the launcher's 3 KB are the same in every module)
    source = next(iter(BuiltinPolicy("cpu", direct_launch=False).candidates(problem, graph, "strict"))).source
    assert len(source) < 3000  # 34 KB before subexpressions were named
    assert source.count("tl.abs(") == 1
    assert "import math" not in source and "import torch.nn.functional as F" not in source
    compile(source, "atan", "exec")


def test_builtins_atomics_and_prints_keep_their_statements():
    """`min(...)`/`float(...)` of constants stay constexpr (a local would make them tensors); no
    load is named across an atomic, a print or an assertion; a store's arguments still are."""
    source = '''def k(x_ptr, out, BLOCK: tl.constexpr):
    r = tl.arange(0, min(BLOCK, 32)) + tl.arange(0, min(BLOCK, 32))
    m = tl.where(r > 0, float("-inf"), 0.0) + tl.where(r > 1, float("-inf"), 1.0)
    a = tl.atomic_add(out, tl.load(x_ptr) * 2.0) + tl.load(x_ptr) * 2.0
    tl.device_print("v", tl.load(x_ptr) * 2.0, tl.load(x_ptr) * 2.0)
'''
    assert name_common_subexpressions(source) == source
    store = '''def k(x_ptr, out):
    tl.store(out, tl.exp(tl.load(x_ptr)) + tl.exp(tl.load(x_ptr)))
'''
    assert name_common_subexpressions(store).splitlines()[1:] == ["    _t_0 = tl.exp(tl.load(x_ptr))",
                                                                  "    tl.store(out, _t_0 + _t_0)"]
