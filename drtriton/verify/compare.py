"""Comparing a candidate's output with the reference's: allclose plus a relative-error norm.

Runs in the reference worker, on tensors the candidate process has no handle on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .verdict import Tolerance


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
    if not (ref.is_floating_point() or ref.is_complex()):
        mismatched = int((out != ref).sum())
        return Comparison(mismatched == 0, None, None, None, mismatched, total,
                          f"{mismatched} of {total} values differ" if mismatched else "")

    o, r = out.double(), ref.double()
    both_nan = o.isnan() & r.isnan()
    same_inf = o.isinf() & r.isinf() & (o == r)
    special_ok = both_nan | same_inf
    diff = (o - r).abs()
    diff = torch.where(special_ok, torch.zeros_like(diff), diff)
    diff = torch.nan_to_num(diff, nan=float("inf"))  # a NaN where the reference has a number
    within = (diff <= tol.atol + tol.rtol * r.abs().nan_to_num(posinf=0.0)) | special_ok
    mismatched = int((~within).sum())

    finite = r.isfinite() & o.isfinite()
    max_abs = float(diff.max())
    rel = diff[finite] / r[finite].abs().clamp_min(tol.atol)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    ref_norm = float(r[finite].norm())
    err_norm = float((o - r)[finite].norm())
    if ref_norm > 0:
        rel_norm = err_norm / ref_norm
    else:  # an all-zero reference: any error is relative to nothing
        rel_norm = 0.0 if err_norm == 0 else float("inf")

    notes = []
    if mismatched:
        notes.append(f"{mismatched} of {total} elements outside atol={tol.atol:g}, rtol={tol.rtol:g}")
    nan_out = int((o.isnan() & ~r.isnan()).sum())
    if nan_out:
        notes.append(f"{nan_out} NaN where the reference has numbers (unwritten output?)")
    rel_ok = rel_norm <= tol.max_rel_error_norm or ref_norm == 0 and mismatched == 0
    if not rel_ok and not mismatched:
        notes.append(
            f"relative error norm {rel_norm:.2e} exceeds {tol.max_rel_error_norm:g} "
            "(output is close only in absolute terms: near-constant or low precision?)"
        )
    return Comparison(
        passed=mismatched == 0 and rel_ok,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        rel_error_norm=rel_norm,
        mismatched=mismatched,
        total=total,
        note="; ".join(notes),
    )
