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


# The float64 arbiter of near misses (compare_with_exact).

def _centered_means(x):
    return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)


def test_an_output_below_fp32_resolution_is_judged_against_float64():
    """The mean of a centred row is 0 in exact arithmetic; the fp32 reference is rounding noise,
    so a more accurate output fails the relative-error norm against it, and passes the arbiter."""
    from drtriton.verify.compare import compare_with_exact, is_near_miss

    x = torch.randn(8, 4096, generator=torch.Generator().manual_seed(0))
    ref, exact = _centered_means(x), _centered_means(x.double())
    out = exact.float()
    direct = compare(out, ref, FP32)
    assert not direct.passed and direct.mismatched == 0 and is_near_miss(direct, ref)
    judged = compare_with_exact(out, ref, exact, FP32)
    assert judged.passed and "float64" in judged.note
    # zeros are as good here: the exact answer is 0
    assert compare_with_exact(torch.zeros_like(ref), ref, exact, FP32).passed


def test_the_arbiter_allows_a_few_times_the_references_own_error_and_no_more():
    from drtriton.verify.compare import EXACT_SLACK, compare_with_exact

    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 4096, generator=g)
    ref, exact = _centered_means(x), _centered_means(x.double())
    own = ref.double() - exact  # what fp32 itself gets wrong: all of ref here
    assert compare_with_exact((exact + 2 * own).float(), ref, exact, FP32).passed
    assert not compare_with_exact((exact + 3 * EXACT_SLACK * own).float(), ref, exact, FP32).passed
    # a sum of 8192 products (KernelBench L2/14): twice fp32's error passes, bf16 rounding fails
    a, b = torch.randn(64, 8192, generator=g), torch.randn(8192, 32, generator=g)
    ref, exact = (a @ b).sum(dim=1), (a.double() @ b.double()).sum(dim=1)
    assert compare_with_exact((exact + 2 * (ref.double() - exact)).float(), ref, exact, FP32).passed
    assert not compare_with_exact(exact.bfloat16().float(), ref, exact, FP32).passed


def test_the_arbiter_does_not_rescue_near_constant_outputs():
    """Zeros for softmax rows of 32768 pass allclose; against float64 they are still all error."""
    from drtriton.verify.compare import compare_with_exact, is_near_miss

    x = torch.rand(4, 32768, generator=torch.Generator().manual_seed(2))
    ref, exact = x.softmax(dim=1), x.double().softmax(dim=1)
    zeros = torch.zeros_like(ref)
    assert is_near_miss(compare(zeros, ref, FP32), ref)
    judged = compare_with_exact(zeros, ref, exact, FP32)
    assert not judged.passed and "beyond" in judged.note


def test_the_arbiter_declines_references_that_disagree_on_infinities_and_far_misses():
    from drtriton.verify.compare import compare_with_exact, is_near_miss

    ref = torch.tensor([1.0, float("inf")])
    exact = torch.tensor([1.0, 3.5e38], dtype=torch.float64)  # overflowed in fp32 only
    assert compare_with_exact(ref.clone(), ref, exact, FP32) is None
    far = torch.randn(1000)
    assert not is_near_miss(compare(far + 1, far, FP32), far)  # every element wrong: no arbiter
    one_off = far.clone()
    one_off[0] += 1
    assert is_near_miss(compare(one_off, far, FP32), far)
    half = far.half()  # fp16 references are not arbitrated: their tolerance is already wide
    assert not is_near_miss(compare(one_off.half(), half, Tolerance.for_dtype("torch.float16")), half)


def test_many_elements_a_little_off_are_arbitrated():
    """A GPU's fp32 cumsum down a million rows is off by more than the tolerance at 15% of its
    elements, each by little: still a near miss (the norm is close), and a candidate as exact as
    float64 passes the arbiter where a wrong one does not."""
    from drtriton.verify.compare import compare_with_exact, is_near_miss

    g = torch.Generator().manual_seed(4)
    exact = 1000 + torch.randn(100_000, generator=g, dtype=torch.float64)
    ref = (exact + torch.where(torch.rand(100_000, generator=g) < 0.3, 0.3, 0.0)).float()  # 30% off by 0.3
    ours = compare(exact.float(), ref, FP32)
    assert ours.mismatched > 0.25 * ours.total and is_near_miss(ours, ref)
    assert compare_with_exact(exact.float(), ref, exact, FP32).passed
    wrong = (exact + 2.0).float()  # off everywhere, by more than the reference is anywhere
    assert not is_near_miss(compare(wrong, ref, FP32), ref) or not compare_with_exact(wrong, ref, exact, FP32).passed


def test_one_ill_conditioned_element_loosens_no_other():
    """A large feature (or a threshold that flips between fp32 and float64) makes the fp32
    reference's worst error large; elements elsewhere are still held to their own."""
    from drtriton.verify.compare import compare_with_exact, is_near_miss

    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(32, 64, generator=g), torch.randn(256, 64, generator=g)
    w[0] *= 1e4  # one feature 1e4 times larger: its fp32 rounding is ~1e-3
    ref, exact = x @ w.T, x.double() @ w.double().T
    worst = float((ref.double() - exact).abs().max())
    assert worst > 1e-3
    wrong = exact.clone()
    wrong[:, 1:9] += 2 * worst  # 8 of 256 features off by twice the big feature's rounding
    wrong = wrong.float()
    assert is_near_miss(compare(wrong, ref, FP32), ref)
    assert not compare_with_exact(wrong, ref, exact, FP32).passed
    assert compare_with_exact(exact.float(), ref, exact, FP32).passed

    flip = torch.zeros(256, dtype=torch.float64)
    flip[0] = 0.5  # hardshrink at its threshold: 0 in fp32, 0.5 in float64
    wrong = flip.clone()
    wrong[1] = 1.9
    assert not compare_with_exact(wrong.float(), torch.zeros(256), flip, FP32).passed


def _top_p(x: torch.Tensor, threshold: float = 0.9) -> torch.Tensor:
    """A top-p style mask: kept probabilities where the running sum is at most `threshold`."""
    probs = torch.softmax(x, dim=-1)
    return torch.where(torch.cumsum(probs, -1) <= threshold, probs, torch.zeros_like(probs))


def test_a_threshold_that_a_few_ulps_decide_is_judged_by_what_they_move():
    """A mask flipped where the running sum sits within a few ulps of the threshold: the fp32
    reference flips some such elements, a correct candidate (another summation order) others.
    Only the float64 runs on inputs moved by a few ulps show those elements are undetermined."""
    from drtriton.verify.compare import compare_with_exact, conditioning
    from drtriton.verify.worker.harness import PERTURBATIONS, _moved

    x = torch.randn(64, 512, generator=torch.Generator().manual_seed(3)).double()
    exact = _top_p(x)
    cum = torch.cumsum(torch.softmax(x, -1), -1)
    row, col = 5, int((cum[5] <= 0.9).sum())  # the first element past the threshold in row 5
    threshold = float(cum[row, col])  # a threshold exactly on that element's running sum
    exact = _top_p(x, threshold)
    ref = _top_p(x.float(), threshold)
    out = exact.clone()
    out[row, col] = torch.softmax(x[row], -1)[col] if exact[row, col] == 0 else 0.0  # flipped there only
    moved = [_top_p(_moved(x, k), threshold) for k in PERTURBATIONS]
    spread = conditioning(exact, moved)
    assert spread[row, col] > 1e-4  # a few ulps decide that element
    assert float(spread.sum() - spread[row, col]) < 1e-3  # and few others
    assert not compare_with_exact(out.float(), ref, exact, FP32).passed  # held to fp32's own error there
    assert compare_with_exact(out.float(), ref, exact, FP32, spread).passed
    # a flip where a few ulps decide nothing is still wrong
    wrong = exact.clone()
    other = 0 if col > 2 else col + 3
    wrong[row, other] = 0.0 if exact[row, other] != 0 else 0.5
    assert not compare_with_exact(wrong.float(), ref, exact, FP32, spread).passed


def test_a_threshold_that_fp32_rounding_decides_is_judged_by_the_fp32_runs_nearby():
    """Moving a float64 run's inputs by a few ulps moves a running sum by ~2e-8; PyTorch's fp32
    softmax and cumsum on those inputs scatter it by ~1e-7. A mask element that fp32's rounding
    decides, and the float64 runs do not show, counts as the reference's error through the fp32
    runs on inputs nearby (the harness's second round of `_arbitrate`); a flip elsewhere does not."""
    from drtriton.verify.compare import compare_with_exact, conditioning
    from drtriton.verify.worker.harness import PERTURBATIONS, _moved

    x = torch.randn(64, 512, generator=torch.Generator().manual_seed(3)).double()

    def cum(v):
        return torch.cumsum(torch.softmax(v, -1), -1)

    e = cum(x)
    runs64 = [cum(_moved(x, k)) for k in PERTURBATIONS]
    runs32 = [cum(_moved(x, k).float()).double() for k in PERTURBATIONS]
    picked = None
    for row in range(64):
        col = int((e[row] <= 0.9).sum()) - 1  # the last element kept at 0.9
        d64 = max(abs(float(m[row, col] - e[row, col])) for m in runs64)
        up = max(float(m[row, col] - e[row, col]) for m in runs32)
        if up > 3 * d64:
            picked = (row, col, float(e[row, col]) + (d64 + up) / 2)
            break
    assert picked is not None
    row, col, threshold = picked  # kept exactly, by every float64 run; dropped by an fp32 one
    exact = _top_p(x, threshold)
    assert exact[row, col] != 0
    ref = _top_p(x.float(), threshold)
    out = exact.clone()
    out[row, col] = 0.0  # the candidate's rounding dropped it
    moved64 = [_top_p(_moved(x, k), threshold) for k in PERTURBATIONS]
    moved32 = [_top_p(_moved(x, k).float(), threshold) for k in PERTURBATIONS]
    assert not compare_with_exact(out.float(), ref, exact, FP32, conditioning(exact, moved64)).passed
    both = conditioning(exact, moved64 + moved32)
    assert compare_with_exact(out.float(), ref, exact, FP32, both).passed
    wrong = exact.clone()
    wrong[row, col - 40] = 0.0  # far from the threshold: nothing nearby drops it
    assert not compare_with_exact(wrong.float(), ref, exact, FP32, both).passed


def test_conditioning_needs_runs_of_the_same_shape():
    from drtriton.verify.compare import conditioning

    exact = torch.zeros(3, 4, dtype=torch.float64)
    assert conditioning(exact, [torch.zeros(4, 3)]) is None and conditioning(exact, []) is None
    moved = exact.clone()
    moved[1, 2] = 0.5
    assert torch.equal(conditioning(exact, [exact, moved]), moved)


def test_within_judges_each_element_as_compare_does():
    # (the arbiter without float64 asks it per element: a finite value is never within any
    # tolerance of an infinity, a NaN only of a NaN)
    from drtriton.verify.compare import within

    tol = Tolerance.for_dtype("torch.float32")
    ref = torch.tensor([1.0, float("inf"), float("inf"), float("nan"), float("nan"), -2.0])
    out = torch.tensor([1.0 + 1e-6, float("inf"), 3.0e38, float("nan"), 0.0, -2.5])
    assert within(out, ref, tol).tolist() == [True, True, False, True, False, False]
    assert (~within(out, ref, tol)).sum() == compare(out, ref, tol).mismatched
