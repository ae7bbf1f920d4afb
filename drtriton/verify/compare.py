"""Comparing a candidate's output with the reference's: allclose plus a relative-error norm.

Runs in the reference worker, on tensors the candidate process has no handle on. Works over
chunks, so outputs of billions of elements compare in bounded memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .verdict import Tolerance

CHUNK = 1 << 25


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
        special_ok = (o.isnan() & r.isnan()) | (o.isinf() & r.isinf() & (o == r))
        diff = torch.where(special_ok, torch.zeros_like(o), (o - r).abs())
        diff = torch.nan_to_num(diff, nan=math.inf)  # NaN where the reference has a number
        within = (diff <= tol.atol + tol.rtol * r.abs().nan_to_num(posinf=0.0)) | special_ok
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
