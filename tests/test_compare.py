"""The comparison: allclose with KernelBench's tolerances plus a relative-error norm."""

import torch

from drtriton.verify.compare import compare
from drtriton.verify.verdict import Tolerance

FP32 = Tolerance.for_dtype("torch.float32")


def test_equal_and_rounding_differences_pass():
    ref = torch.randn(1000)
    assert compare(ref.clone(), ref, FP32).passed
    assert compare(ref * (1 + 1e-6), ref, FP32).passed


def test_small_outputs_that_pass_allclose_fail_the_norm():
    ref = torch.rand(4, 32768).softmax(dim=1)  # every value below 1e-4
    zeros = torch.zeros_like(ref)
    assert torch.allclose(zeros, ref, atol=1e-4, rtol=1e-4)
    c = compare(zeros, ref, FP32)
    assert not c.passed and c.mismatched == 0 and "relative error norm" in c.note


def test_nan_where_reference_has_numbers_is_named():
    ref = torch.randn(100)
    out = ref.clone()
    out[10:20] = float("nan")
    c = compare(out, ref, FP32)
    assert not c.passed and c.mismatched == 10 and "10 NaN" in c.note


def test_matching_nans_and_infs_pass():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare(ref.clone(), ref, FP32).passed
    assert not compare(torch.tensor([1.0, float("nan"), -float("inf"), -float("inf")]), ref, FP32).passed


def test_shape_dtype_and_integer_outputs():
    ref = torch.arange(6)
    assert not compare(ref.reshape(2, 3), ref, FP32).passed
    assert not compare(ref.float(), ref, FP32).passed
    bad = ref.clone()
    bad[0] = 5
    c = compare(bad, ref, FP32)
    assert not c.passed and c.mismatched == 1


def test_all_zero_reference():
    ref = torch.zeros(10)
    assert compare(torch.zeros(10), ref, FP32).passed
    assert compare(torch.full((10,), 1e-7), ref, FP32).passed  # within atol of an exact zero
    assert not compare(torch.full((10,), 1e-3), ref, FP32).passed


def test_chunked_comparison_matches(monkeypatch):
    import drtriton.verify.compare as mod

    ref = torch.randn(10_000)
    out = ref + torch.randn(10_000) * 1e-3
    whole = compare(out, ref, FP32)
    monkeypatch.setattr(mod, "CHUNK", 1000)
    chunked = mod.compare(out, ref, FP32)
    assert whole.mismatched == chunked.mismatched
    assert abs(whole.rel_error_norm - chunked.rel_error_norm) < 1e-12
    assert whole.max_abs_error == chunked.max_abs_error
