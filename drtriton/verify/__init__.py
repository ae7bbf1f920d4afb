"""The verifier: is a candidate correct, is it really Triton, and how fast is it.

Public API: `Verifier`, `VerifyConfig`, `Verdict` (and its parts), `check_source`.
"""

from .pool import Cancelled
from .static import StaticReport, check_source
from .verdict import GraphTimings, Timing, Timings, Tolerance, Trial, Verdict
from .verifier import Verifier, VerifyConfig

__all__ = [
    "Cancelled", "GraphTimings", "StaticReport", "Timing", "Timings", "Tolerance", "Trial", "Verdict",
    "Verifier", "VerifyConfig", "check_source",
]
