"""Comparing a candidate's output with the reference's: allclose plus a relative-error norm.

Runs in the reference worker, on tensors the candidate process has no handle on. Works over
chunks, so outputs of billions of elements compare in bounded memory.

A near miss against an fp32 reference goes to an arbiter (`compare_with_exact`): the reference
run again in float64. Some outputs are below fp32's own resolution (a sum of 8192 products, the
mean of a normalised tensor, which is 0 in exact arithmetic), and there the fp32 reference is no
better a judge than the candidate; the arbiter asks instead that the candidate be about as close
to the exact result as PyTorch's fp32 output is. Where the exact result itself is not
determined at fp32 resolution (a `cum <= 0.9` mask whose running sum sits within a few ulps of
the threshold), the reference runs again on inputs moved by a few ulps, in float64 and then, for
elements still off, in its own fp32 (where fp32's rounding of the running sum decides the mask),
and what that moves an element by counts as the reference's error there (`conditioning`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .verdict import Tolerance

CHUNK = 1 << 25
# The arbiter lets a candidate be this many times as far from the float64 result as the fp32
# reference is (per element on top of the usual tolerance, and in the error norm).
EXACT_SLACK = 4.0
NEAR_MISS_FRACTION = 0.1  # at most this share of elements outside the tolerance (a cost filter:
# the arbiter holds every element to its own bound; wrong kernels are usually wrong everywhere)...
NEAR_MISS_NORM = 1e-3  # ... or any share, all of it this close in norm: a long running sum's fp32
# reference (a GPU cumsum over a million rows) is off at more elements than that, each by little
SAMPLE = 1 << 20  # elements sampled for the reference's typical (median) error


@dataclass
class Comparison:
    passed: bool
    max_abs_error: float | None
    max_rel_error: float | None
    rel_error_norm: float | None
    mismatched: int
    total: int
    note: str = ""


def compare(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    total = ref.numel()
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(False, None, None, None, total, total,
                          f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(False, None, None, None, total, total, f"dtype {out.dtype}, expected {ref.dtype}")
    if total == 0:
        return Comparison(True, 0.0, 0.0, 0.0, 0, 0)
    out, ref = out.reshape(-1), ref.reshape(-1)
    if not (ref.is_floating_point() or ref.is_complex()):
        mismatched = sum(int((out[i:i + CHUNK] != ref[i:i + CHUNK]).sum()) for i in range(0, total, CHUNK))
        return Comparison(mismatched == 0, None, None, None, mismatched, total,
                          f"{mismatched} of {total} values differ" if mismatched else "")

    mismatched = nan_out = 0
    max_abs = max_rel = err_sq = ref_sq = 0.0
    # fp32 arithmetic on the differences (its rounding is far below any tolerance), float64 sums.
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    for i in range(0, total, CHUNK):
        o, r = out[i:i + CHUNK].to(work), ref[i:i + CHUNK].to(work)
        diff, within = _differences(o, r, tol)
        mismatched += int((~within).sum())
        nan_out += int((o.isnan() & ~r.isnan()).sum())
        finite = r.isfinite() & o.isfinite()
        d, rf = (o - r)[finite], r[finite]
        max_abs = max(max_abs, float(diff.max()))
        if d.numel():
            max_rel = max(max_rel, float((d.abs() / rf.abs().clamp_min(tol.atol)).max()))
            err_sq += float((d.double() ** 2).sum())
            ref_sq += float((rf.double() ** 2).sum())
    ref_norm, err_norm = math.sqrt(ref_sq), math.sqrt(err_sq)
    if ref_norm > 0:
        rel_norm = err_norm / ref_norm
    else:  # an all-zero reference: any error is relative to nothing
        rel_norm = 0.0 if err_norm == 0 else math.inf

    notes = []
    if mismatched:
        notes.append(f"{mismatched} of {total} elements outside atol={tol.atol:g}, rtol={tol.rtol:g}")
    if nan_out:
        notes.append(f"{nan_out} NaN where the reference has numbers (unwritten output?)")
    rel_ok = rel_norm <= tol.max_rel_error_norm or (ref_norm == 0 and not mismatched)
    if not rel_ok and not mismatched:
        notes.append(
            f"relative error norm {rel_norm:.2e} exceeds {tol.max_rel_error_norm:g} "
            "(output is close only in absolute terms: near-constant or low precision?)"
        )
    return Comparison(
        passed=not mismatched and rel_ok,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        rel_error_norm=rel_norm,
        mismatched=mismatched,
        total=total,
        note="; ".join(notes),
    )


def _differences(o: torch.Tensor, r: torch.Tensor, tol: Tolerance) -> tuple[torch.Tensor, torch.Tensor]:
    """Per element, |o - r| (0 where both are the same NaN or infinity, inf where o is NaN and r
    is not) and whether that is within `tol` of r."""
    special_ok = (o.isnan() & r.isnan()) | (o.isinf() & r.isinf() & (o == r))
    diff = torch.where(special_ok, torch.zeros_like(o), (o - r).abs())
    diff = torch.nan_to_num(diff, nan=math.inf)  # NaN where the reference has a number
    return diff, (diff <= tol.atol + tol.rtol * r.abs().nan_to_num(posinf=0.0)) | special_ok


def within(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Per element, whether `out` is within `tol` of `ref` as `compare` judges it (in float64)."""
    return _differences(out.double(), ref.double(), tol)[1]


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same shape and values, NaN matching NaN."""
    return tuple(a.shape) == tuple(b.shape) and bool(((a.isnan() & b.isnan()) | (a == b)).all())


def is_near_miss(c: Comparison, ref: torch.Tensor) -> bool:
    """Failed, but in a way an fp32 reference's own rounding could explain: same shape and
    dtype, no NaN for numbers, at most 10% of elements outside the tolerance or the whole
    within 1e-3 in relative error norm."""
    close = c.mismatched <= NEAR_MISS_FRACTION * c.total or (
        c.rel_error_norm is not None and c.rel_error_norm <= NEAR_MISS_NORM)
    return (not c.passed and ref.dtype == torch.float32 and c.max_abs_error is not None
            and math.isfinite(c.max_abs_error) and close)


def compare_with_exact(out: torch.Tensor, ref: torch.Tensor, exact: torch.Tensor,
                       tol: Tolerance, spread: torch.Tensor | None = None) -> Comparison | None:
    """Judge `out` against `exact` (the reference computed in float64): each element within the
    usual tolerance plus EXACT_SLACK times the fp32 reference's own error at that element (or
    its typical error, the median, where it happened to be closer), and the error norm within
    EXACT_SLACK times the reference's. Per element, so one ill-conditioned element (a large
    feature, a threshold that flips) loosens nothing else. `spread`: how far each element of
    the float64 result moves when the inputs move by a few fp32 ulps (`conditioning`); where
    that is more than the fp32 reference's own error, the element is not determined at fp32
    resolution (a threshold right next to a value) and counts as the reference's error there.
    None when `exact` cannot arbitrate: another shape, or values not finite in one reference and
    finite in the other."""
    total = ref.numel()
    if tuple(exact.shape) != tuple(ref.shape) or tuple(out.shape) != tuple(ref.shape):
        return None
    out, ref, exact = out.reshape(-1), ref.reshape(-1), exact.reshape(-1)
    chunks = [slice(i, i + CHUNK) for i in range(0, total, CHUNK)]

    # The fp32 reference's typical error against the float64 one (a sample's median)
    step = max(1, total // SAMPLE)
    sample = (ref[::step].double() - exact[::step].double()).abs()
    sample = sample[sample.isfinite()]
    typical = float(sample.median()) if sample.numel() else 0.0

    mismatched = 0
    ref_max = ref_sq = exact_sq = max_abs = max_rel = err_sq = 0.0
    for s in chunks:
        o, r, x = out[s].double(), ref[s].double(), exact[s].double()
        finite = x.isfinite()
        if not torch.equal(finite, r.isfinite()) or not identical(r[~finite], x[~finite]):
            return None
        # what fp32 itself gets wrong here, element by element (or what a few ulps of input move)
        own = torch.where(finite, (r - x).abs(), torch.zeros_like(r))
        if spread is not None:
            own = torch.maximum(own, torch.where(finite, spread.reshape(-1)[s].double().nan_to_num(), 0.0))
        if finite.any():
            ref_max = max(ref_max, float(own.max()))
            ref_sq += float((own ** 2).sum())
            exact_sq += float((x[finite] ** 2).sum())
        special_ok = ~finite & ((o.isnan() & x.isnan()) | (o == x))
        diff = torch.where(finite, (o - x).abs(), torch.zeros_like(o)).nan_to_num(nan=math.inf)
        allowed = tol.atol + tol.rtol * x.abs() + EXACT_SLACK * own.clamp_min(typical)
        mismatched += int(((diff > allowed) & finite).sum() + (~finite & ~special_ok).sum())
        max_abs = max(max_abs, float(diff.max()))
        if finite.any():
            max_rel = max(max_rel, float((diff / x.abs().clamp_min(tol.atol))[finite].max()))
            err_sq += float((diff[finite] ** 2).sum())
    ref_err, exact_norm = math.sqrt(ref_sq), math.sqrt(exact_sq)
    err_norm = math.sqrt(err_sq)
    norm_ok = err_norm <= max(tol.max_rel_error_norm * exact_norm, EXACT_SLACK * ref_err)
    passed = mismatched == 0 and norm_ok
    note = (f"judged against the reference run in float64 (the fp32 reference is itself off by "
            f"{ref_max:.1e} at most, {typical:.1e} typically, {ref_err:.1e} in norm): the output is "
            f"off by {max_abs:.1e} at most, {err_norm:.1e} in norm, "
            + (f"within {EXACT_SLACK:g}x the reference's own error" if passed else
               f"{mismatched} elements beyond {EXACT_SLACK:g}x the reference's own error there"
               if mismatched else f"beyond {EXACT_SLACK:g}x the reference's own error in norm"))
    return Comparison(passed=passed, max_abs_error=max_abs, max_rel_error=max_rel,
                      rel_error_norm=err_norm / exact_norm if exact_norm else (0.0 if err_norm == 0 else math.inf),
                      mismatched=mismatched, total=total, note=note)


def conditioning(exact: torch.Tensor, moved: list[torch.Tensor]) -> torch.Tensor | None:
    """Per element, the most the float64 result moved over runs on inputs perturbed by a few fp32
    ulps (`moved`); None when a run gave another shape."""
    if not moved or any(tuple(m.shape) != tuple(exact.shape) for m in moved):
        return None
    spread = torch.zeros_like(exact, dtype=torch.float64)
    for m in moved:
        spread = torch.maximum(spread, (m.double() - exact.double()).abs().nan_to_num(nan=0.0, posinf=0.0))
    return spread

