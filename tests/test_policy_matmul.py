"""The matrix product's shapes that square tiles serve badly, on CPU under the Triton interpreter:
a narrow side (tiles 16 wide), a side of one (FMAs instead of tl.dot), few output tiles over a
long K (split-K: partial tiles, then a finishing kernel with the bias and the epilogue), rows
whose stride is not a multiple of 16 (copied into aligned rows)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from drtriton.policy.emit.matmul import NARROW_N, aligned_rows, split_k  # noqa: E402
from drtriton.policy.builtin import BuiltinPolicy  # noqa: E402
from test_policy_pool_scan_loss import capture, check, first_candidate, source  # noqa: E402


def test_split_k_fills_the_sms_only_when_the_tiles_cannot():
    assert split_k(4096, 4096, 8192, 1, 132) == (1, 8192)  # 4096 tiles: no split
    assert split_k(256, 256, 2048, 1, 132) == (1, 2048)  # K too short to be worth it
    assert split_k(64, 64, 100_000, 1, 1) == (1, 100_000)  # one SM (a CPU): never
    assert split_k(0, 20, 8192, 1, 132) == (1, 8192)  # an empty output: nothing to split
    for m, n, k, z in [(256, 256, 524_288, 1), (2048, 1, 1_048_576, 1), (3, 20, 8192, 1), (16, 24, 4500, 2)]:
        s, kc = split_k(m, n, k, z, 132)
        assert s > 1 and kc % 128 == 0 and (s - 1) * kc < k <= s * kc, (m, n, k, s, kc)
        tiles = -(-m // 64) * -(-n // 64) * z
        assert tiles * s <= 2 * 132 + tiles  # about two programs an SM, no more


@pytest.mark.parametrize("transposed", [False, True])
def test_rows_not_16_apart_are_copied_into_aligned_rows(transposed):
    t = torch.randn(37, 2949)
    t = t.t() if transposed else t  # column-major: the contiguous dim is the first
    got = aligned_rows(t)
    assert torch.equal(got, t) and got.shape == t.shape
    contiguous = 0 if transposed else 1
    assert got.stride(contiguous) == 1 and got.stride(1 - contiguous) % 16 == 0
    aligned = torch.randn(37, 2944)
    assert aligned_rows(aligned) is aligned and aligned_rows(aligned.t()) is not aligned.t()  # (a new view)
    assert aligned_rows(aligned.t()).data_ptr() == aligned.data_ptr()  # the same storage: no copy


# The candidate run in a subprocess (TRITON_INTERPRET must be set before triton is imported) with
# `_sm_count` answering a GPU's or a CPU's SM count: its largest error against the reference and
# how often its finishing kernel (split-K's second) ran
_RUN = """
import importlib.util, json, sys, torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

ref, cand = load(sys.argv[1], "problem"), load(sys.argv[2], "candidate")
cand._sm_count = lambda device: int(sys.argv[3])
finishes = []
for name, fn in vars(cand).items():
    if name.endswith("_finish"):
        fn = getattr(fn, "kernel", fn)  # the Triton kernel inside the module's _DirectLaunch
        run = fn.run
        fn.run = lambda *a, run=run, **k: (finishes.append(1), run(*a, **k))[1]
torch.manual_seed(0)
inputs = ref.get_inputs()
want, got = ref.Model()(*inputs), cand.ModelNew()(*inputs)
print(json.dumps({"error": float((want - got).abs().max()), "scale": float(want.abs().max()),
                  "finishes": len(finishes)}))
"""


def _run(cand, problem, sms: int, tmp_path) -> dict:
    (tmp_path / "problem.py").write_text(problem.source)
    (tmp_path / "candidate.py").write_text(cand.source)
    proc = subprocess.run([sys.executable, "-c", _RUN, str(tmp_path / "problem.py"), str(tmp_path / "candidate.py"),
                           str(sms)], capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("expr,inputs,args", [
    ("torch.relu(F.linear(x, w, b)) * 2", "torch.randn(3, 8192), torch.randn(20, 8192), torch.randn(20)", "x, w, b"),
    ("torch.matmul(x, y)", "torch.randn(40, 5000), torch.randn(5000)", "x, y"),  # matrix-vector
    ("torch.bmm(x, y) + 1", "torch.randn(2, 16, 4500), torch.randn(2, 4500, 24)", "x, y"),
])
def test_few_output_tiles_over_a_long_k_split_it_and_finish_with_the_epilogue(cpu_verifier, expr, inputs, args,
                                                                              tmp_path):
    src = source(expr, inputs, args=args)
    cand = check(cpu_verifier, src, ["Triton"])  # the verifier's run: one SM, no split
    assert "_split_k(" in cand.source and "_finish" in cand.source
    problem, _ = first_candidate(src)
    for sms, finishes in ((132, 1), (1, 0)):  # a GPU's SM count splits K; one SM does not
        run = _run(cand, problem, sms, tmp_path)
        assert run["finishes"] == finishes and run["error"] <= 1e-3 + 1e-4 * run["scale"], run


def test_a_narrow_product_gets_narrow_tiles_and_a_large_one_aligned_rows():
    _, gemv = first_candidate(source("torch.matmul(x, y)", "torch.randn(64, 300), torch.randn(300, 1)", args="x, y"))
    assert f'"BN": {NARROW_N[0]["BN"]}' in gemv.source and "_aligned_rows" not in gemv.source
    # a product of 2**33 multiply-adds captured on the meta device (never run here)
    _, large = first_candidate(source("torch.matmul(x, y)", "torch.randn(2048, 2049), torch.randn(2049, 2048)",
                                      args="x, y"))
    assert "_a = _aligned_rows(_a) if _N >= 256" in large.source and '"BN": 16' not in large.source
    assert "_split_k" not in large.source  # 1024 output tiles fill the GPU


@pytest.mark.parametrize("expr,inputs,args,fma", [
    ("torch.matmul(x, y) * 3", "torch.randn(70, 300), torch.randn(300, 1)", "x, y", "n"),  # one column
    ("torch.matmul(x, y)", "torch.randn(40, 5000), torch.randn(5000)", "x, y", "n"),  # a vector, split
    ("torch.relu(F.linear(x, w, b))", "torch.randn(1, 8192), torch.randn(20, 8192), torch.randn(20)", "x, w, b",
     "m"),  # a batch of one through a linear layer, split
    ("torch.matmul(x, w)", "torch.randn(300), torch.randn(300, 33)", "x, w", "m"),
])
def test_a_side_of_one_has_an_fma_variant_that_verifies(cpu_verifier, expr, inputs, args, fma, tmp_path):
    src = source(expr, inputs, args=args)
    problem, graph, _ = capture(src)
    cand = next(c for c in BuiltinPolicy("cpu").candidates(problem, graph, "strict")
                if f"fma={fma}" in " ".join(c.plan))
    assert "tl.dot" not in cand.source and "acc_k" in cand.source
    verdict = cpu_verifier.verify(problem, cand.source, mode="strict")
    assert verdict.correct, verdict.summary
    if "_split_k(" in cand.source:  # the split path too, forced with a GPU's SM count
        run = _run(cand, problem, 132, tmp_path)
        assert run["finishes"] == 1 and run["error"] <= 1e-3 + 1e-4 * run["scale"], run


def test_on_the_gpu_the_fma_variant_of_a_side_of_one_comes_first():
    src = source("torch.matmul(x, y)", "torch.randn(64, 300), torch.randn(300, 1)", args="x, y")
    problem, graph, _ = capture(src)
    first = next(iter(BuiltinPolicy("cuda").candidates(problem, graph, "strict")))
    assert "fma=n" in " ".join(first.plan)


def test_a_linear_layer_is_sized_by_its_output_features():
    """nn.Linear's weight is (N, K): a layer to 10 features from 4096 gets the narrow tiles a
    matmul of the same shape gets, and a batch of 1024 over K = 8192 to 10 features splits K."""
    narrow = source("F.linear(x, w)", "torch.randn(512, 4096), torch.randn(10, 4096)", args="x, w")
    _, cand = first_candidate(narrow)
    assert '"BN": 16' in cand.source
    _, cand = first_candidate(source("F.linear(x, w)", "torch.randn(1024, 8192), torch.randn(10, 8192)", args="x, w"))
    assert "_split_k(" in cand.source
    _, cand = first_candidate(source("F.linear(x, w)", "torch.randn(64, 8), torch.randn(4096, 8)", args="x, w"))
    assert '"BN": 16' not in cand.source and '"BM": 16' not in cand.source


def test_a_large_product_with_a_short_side_copies_nothing_it_reads_once():
    _, cand = first_candidate(source("F.linear(x, w)", "torch.randn(8, 20001), torch.randn(30001, 20001)",
                                     args="x, w"))
    assert "_b = _aligned_rows(_b) if _M >= 256 else _b" in cand.source  # 8 rows: the weight is not copied
