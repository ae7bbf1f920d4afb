"""What the user reads about a conversion: the record of one (`Report`), and its diagnostic line,
code lens title and Markdown report (hover and `drtriton.report`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# states of a conversion
QUEUED, RUNNING, DONE, CANCELLED, FAILED = "queued", "running", "done", "cancelled", "failed"

# what went wrong before or outside the search (Report.error_kind); also the diagnostic code
NO_INPUTS = "no-inputs"
SYNTAX = "syntax-error"
PROBLEM = "problem"  # the module cannot be built or fed (ProblemError)
DEVICE = "device"  # no GPU, or the verifier could not start
POLICY = "policy"  # unknown policy, missing endpoint or model, model failing to load
INTERNAL = "internal"  # a bug: the message and the client log have the details
NO_CORRECT = "no-correct-version"
CONVERTED = "converted"


@dataclass
class Report:
    """One conversion of one class, from the command to the verdict."""

    uri: str
    class_name: str
    version: int | None  # the document version that was converted
    job_id: int = 0
    state: str = QUEUED
    output_uri: str | None = None
    settings: dict = field(default_factory=dict)
    status: str = "queued"  # the latest progress line
    candidates: list[dict] = field(default_factory=list)  # "candidate" events
    best: dict | None = None  # the latest "best" event
    result: object | None = None  # drtriton.search.SearchResult
    error: str | None = None
    error_kind: str | None = None
    error_at: tuple[int, int] | None = None  # (line, col) for syntax errors
    problem_key: str | None = None
    class_hash: str | None = None  # the class's text when it was converted (modules.ClassInfo)
    valid_for: int | None = None  # the latest document version it was checked against
    stale: bool = False  # the class changed after the conversion
    streamed: int = 0  # whole-module candidates written into the output file
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    # -- the verdict -----------------------------------------------------------------------
    @property
    def correct(self) -> bool:
        return bool(self.result is not None and getattr(self.result, "correct", False))

    @property
    def verdict(self):
        """The verdict of the best module (final, or best so far), as a Verdict or None."""
        if self.result is not None and getattr(self.result, "verdict", None) is not None:
            return self.result.verdict
        if self.best and self.best.get("verdict"):
            from drtriton.verify import Verdict

            try:
                return Verdict.from_dict(self.best["verdict"])
            except Exception:
                return None
        return None

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started


def _speed(verdict) -> str | None:
    if verdict is None:
        return None
    parts = []
    if verdict.speedup_eager is not None:
        parts.append(f"{verdict.speedup_eager:.2f}x vs eager")
    if verdict.speedup_compile is not None:
        parts.append(f"{verdict.speedup_compile:.2f}x vs torch.compile")
    return ", ".join(parts) or None


# --------------------------------------------------------------------------------------------
# One line: diagnostics and code lenses


def diagnostic(report: Report) -> tuple[str, str, str] | None:
    """The verdict on the class: (severity: information|warning|error, message, code), or None
    when there is nothing to show (cancelled, outdated, still running without a result)."""
    if report.stale or report.state == CANCELLED:
        return None
    if report.state == FAILED:
        severity = "warning" if report.error_kind in (NO_INPUTS, PROBLEM, POLICY) else "error"
        return severity, report.error or "the conversion failed", report.error_kind or INTERNAL
    if report.state in (QUEUED, RUNNING):
        if report.best:  # a verified module already: say so while the search goes on
            return "information", f"{report.best['summary']} (so far; the search goes on)", CONVERTED
        return None
    if report.correct:
        return "information", report.result.verdict.summary, CONVERTED
    reason = getattr(report.result, "reason", "") or "no candidate was correct"
    where = " The output file holds the last attempt." if report.streamed else ""
    return "warning", f"no correct Triton version of {report.class_name} found: {reason}.{where}", NO_CORRECT


def diagnostics(report: Report) -> list[tuple[str, str, str]]:
    """The verdict, and a warning for each model policy that failed along the way (an
    unreachable endpoint, a model that would not load): the search went on without it."""
    out = []
    d = diagnostic(report)
    if d is not None:
        out.append(d)
    if not report.stale and report.state != CANCELLED:
        for note in list(report.notes) + list(getattr(report.result, "notes", None) or []):
            out.append(("warning", f"{note} (the search went on without it)", POLICY))
    return out


def lens_title(report: Report) -> str | None:
    if report.stale:
        return "DRTriton: outdated (the class changed), convert again"
    if report.state == QUEUED:
        return "DRTriton: queued (cancel)"
    if report.state == RUNNING:
        if report.best:
            return f"DRTriton: {_speed(report.verdict) or 'correct so far'}, searching (cancel)"
        return "DRTriton: converting (cancel)"
    if report.state == CANCELLED:
        return None
    if report.state == FAILED:
        return "DRTriton: cannot convert (see the problem)"
    if report.correct:
        speed = _speed(report.verdict)
        return f"DRTriton: {speed}" if speed else "DRTriton: correct (speed not measured without a GPU)"
    return "DRTriton: no correct version found"


# --------------------------------------------------------------------------------------------
# The full report (Markdown)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def markdown(report: Report) -> str:
    out = [f"### DRTriton: {report.class_name}"]
    state = {QUEUED: "queued", RUNNING: "converting", DONE: "done", CANCELLED: "cancelled",
             FAILED: "could not convert"}[report.state]
    if report.stale:
        state += " (outdated: the class changed since; convert again)"
    out.append(f"**{state}** · document version {report.version} · {report.seconds:.1f} s")
    if report.state == FAILED:
        out += ["", report.error or "", ""]
    d = diagnostic(report) if report.state != FAILED else None
    if d:
        out += ["", f"**{d[1]}**"]
    elif report.state in (QUEUED, RUNNING):
        out += ["", f"_{report.status}_"]
    # one list item a line: consecutive plain lines would run together into one paragraph
    out.append("")
    if report.output_uri:
        out.append(f"- Output: [{report.output_uri.rsplit('/', 1)[-1]}]({report.output_uri})")
    result = report.result
    if result is not None:
        if getattr(result, "plan", ""):
            out.append(f"- Plan: {result.plan}")
        if getattr(result, "policy", None):
            out.append(f"- Written by: the {result.policy} policy")
    elif report.best:
        out.append(f"- Best so far: {report.best.get('plan', '')}")
    s = report.settings
    if s:
        out.append(f"- Settings: policy {s.get('policy')}, device {s.get('device')}, mode {s.get('mode')}, "
                   f"budget {s.get('search_budget_s', 0):g} s")
    v = report.verdict
    if v is not None:
        out += ["", "#### Best module"]
        out.append(f"- {v.summary}")
        t = v.timings
        if t is not None:
            line = f"- candidate {t.candidate.median_ms:.4f} ms, eager {t.eager.median_ms:.4f} ms"
            line += f", torch.compile {t.compiled.median_ms:.4f} ms" if t.compiled else \
                f", torch.compile: {t.compile_note or 'not measured'}"
            out.append(line)
        if v.triton_kernels:
            out.append(f"- Triton kernels: {', '.join(v.triton_kernels)}")
        if v.triton_share is not None:
            out.append(f"- Share of GPU time in Triton: {v.triton_share:.0%}")
        if v.gpu_busy is not None:
            line = (f"- GPU busy {v.gpu_busy:.0%} of a call ({v.kernels_total_ms:.3f} ms in kernels of "
                    f"{t.candidate.median_ms:.3f} ms)")
            out.append(line + (": the rest is host work between kernels (the launches' Python), which "
                               "replaying forward as a CUDA graph removes (drtriton.cuda_graph)"
                               if v.host_bound else ""))
        g = v.graph
        if g is not None:
            out.append("- Replayed as a CUDA graph (an option): " + (
                f"{g.candidate.median_ms:.4f} ms, {g.speedup_eager:.2f}x vs eager"
                + (f", {g.speedup_compile:.2f}x vs torch.compile(mode='reduce-overhead')" if g.compiled else "")
                if g.candidate else g.note) + (f"; {g.note}" if g.candidate and g.note else ""))
        if v.kernel_ms:
            out.append("- Heaviest kernels (ms a call): "
                       + ", ".join(f"{_cell(k)} {ms:.3f}" for k, ms in list(v.kernel_ms.items())[:6]))
        if v.pytorch_ops:
            out.append("- PyTorch ops in forward: " + ", ".join(f"{k} x{n}" for k, n in sorted(v.pytorch_ops.items())))
        for fallback in getattr(result, "fallbacks", None) or []:
            out.append(f"- Left to PyTorch: {_cell(fallback)}")
        for flag in v.flags:
            out.append(f"- flag: {flag}")
        vs = v.settings or {}
        out.append(f"- device {v.device or '?'}, mode {vs.get('mode', '?')}, {len(v.trials)} trials"
                   + (f", {vs['timing_trials']} timed calls" if t is not None and "timing_trials" in vs else ""))
    notes = list(report.notes) + list(getattr(result, "notes", []) or [])
    if notes:
        out += ["", "#### Notes"] + [f"- {_cell(n)}" for n in notes]
    attempts = list(getattr(result, "attempts", []) or [])
    if attempts or report.candidates:
        out += ["", f"#### Candidates ({len(attempts) or len(report.candidates)})", "",
                "| # | part | policy | status | result | s |", "|---|---|---|---|---|---|"]
        if attempts:
            for a in attempts:
                out.append(f"| {a.id} | {_cell(a.fragment)} | {_cell(a.policy)} | {a.verdict.status} | "
                           f"{_cell(a.verdict.summary)} | {a.seconds:.1f} |")
        else:
            for c in report.candidates:
                out.append(f"| {c.get('id')} | {_cell(c.get('fragment', ''))} | {_cell(c.get('policy', ''))} | "
                           f"{c.get('status', '')} | {_cell(c.get('summary', ''))} | {c.get('seconds', 0):.1f} |")
        errors = [(a.id, r) for a in attempts if not a.verdict.correct for r in a.verdict.reasons[:2]]
        if errors:
            out += ["", "#### Errors"] + [f"- [{i}] {_cell(r)[:300]}" for i, r in errors[:12]]
    return "\n".join(out) + "\n"
