"""`drtriton bench`: verify a set of candidates against a set of problems, and report.

KernelBench's metrics: fast_p = share of ALL problems whose candidate is correct and more than p
times faster than the baseline (a missing candidate counts as incorrect); fast_0 is the correct
rate. Geometric-mean speedups are over the correct candidates that were timed. Mixed-mode plans
may leave GEMMs and convolutions to cuBLAS / cuDNN, so fast_p is also given over the plans whose
heavy operators all run in Triton (`Verdict.heavy_ops_in_pytorch` empty).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import describe_exception
from .problem import Problem
from .verify import Verdict, Verifier
from .verify.gpus import VerifierSlots
from .verify.verdict import STRICT_PYTORCH_COMPUTE

THRESHOLDS = (0.0, 1.0, 1.5, 2.0)


@dataclass
class BenchEntry:
    problem: Problem
    candidate: Path | None  # None: no candidate file for this problem
    verdict: Verdict | None
    search_s: float | None = None  # with --policy: the test-time search's time
    plan: str = ""
    reason: str = ""

    @property
    def correct(self) -> bool:
        """Correct and a conversion: a plan with no computation in Triton does not count."""
        return self.verdict is not None and self.verdict.correct and self.verdict.triton_computes

    @property
    def status(self) -> str:
        if self.verdict is None:
            return "missing"
        return "not converted" if self.verdict.correct and not self.correct else self.verdict.status

    @classmethod
    def from_dict(cls, d: dict) -> "BenchEntry":
        """An entry read back from verdicts.jsonl (the problem by name and origin only)."""
        problem = Problem(name=d["problem"], source="", class_name="Model", origin=d.get("origin", ""))
        verdict = Verdict.from_dict(d["verdict"]) if d.get("verdict") else None
        return cls(problem, Path(d["candidate"]) if d.get("candidate") else None, verdict,
                   d.get("search_s"), d.get("plan", ""), d.get("reason", ""))

    def to_dict(self) -> dict:
        return {
            "problem": self.problem.name,
            "origin": self.problem.origin,
            "candidate": str(self.candidate) if self.candidate else None,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "search_s": self.search_s,
            "plan": self.plan,
            "reason": self.reason,
        }


def find_candidate(folder: Path, problem: Problem) -> Path | None:
    """`<name>.py`, or `level<L>/<name>.py` for KernelBench problems."""
    names = [f"{problem.name}.py"]
    level = problem.meta.get("level")
    if level is not None:
        names.insert(0, f"level{level}/{problem.name}.py")
    for n in names:
        if (folder / n).is_file():
            return folder / n
    return None


class Claims:
    """Problems shared by several bench processes (array jobs on a shared filesystem): each is run
    by the process that first creates its claim file, an atomic exclusive create. No scheduler: a
    process that starts later takes what is left. A claim records who took the problem, so a
    merge can list the problems a stopped job took and never finished (`unfinished`)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def take(self, problem: Problem) -> bool:
        # by origin and name: shards given overlapping --ids still run each problem once
        key = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{problem.origin}-{problem.name}")
        try:
            fd = os.open(self.folder / f"{key}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump({"problem": problem.name, "origin": problem.origin, "host": socket.gethostname(),
                       "pid": os.getpid()}, f)
        return True

    def unfinished(self, entries: list["BenchEntry"]) -> list["BenchEntry"]:
        """Entries for the problems claimed here that `entries` lack (their job stopped first)."""
        have = {e.problem.name for e in entries}
        missing = []
        for path in sorted(self.folder.glob("*.claim")):
            try:
                claim = json.loads(path.read_text())
            except (OSError, ValueError):  # a claim being written, or torn by a crash
                continue
            if claim["problem"] not in have:
                problem = Problem(name=claim["problem"], source="", class_name="Model", origin=claim.get("origin", ""))
                missing.append(BenchEntry(problem, None, None, reason=f"claimed by {claim.get('host')} "
                                          f"(pid {claim.get('pid')}), no verdict: its job stopped first"))
        return missing


def merge_runs(folders: list[Path]) -> list[BenchEntry]:
    """The entries of several `bench --out` folders (shards, or chunks of one benchmark), each
    problem once (the first folder's, where one was run twice). A folder without verdicts is an
    error, not an empty run."""
    entries, seen = [], set()
    for folder in folders:
        path = Path(folder) / "verdicts.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{folder}: no verdicts.jsonl (not a bench --out folder, or its job never started)")
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["problem"] not in seen:
                seen.add(row["problem"])
                entries.append(BenchEntry.from_dict(row))
    return entries


def run_bench(
    problems: list[Problem],
    candidates: Path,
    verifier: Verifier | list[Verifier],
    progress: Callable[[int, int, BenchEntry], None] | None = None,
    mode: str | None = None,
    claims: Claims | None = None,
) -> list[BenchEntry]:
    """Verify each problem's candidate file. Mode "auto": strict, and mixed for a candidate
    strict mode refused only because PyTorch computes in its forward. Several verifiers (one per
    GPU): problems are dealt out to them."""
    def one(problem: Problem, verifier: Verifier) -> BenchEntry:
        path = find_candidate(candidates, problem)
        if path is None:
            return BenchEntry(problem, None, None)
        source = path.read_text()
        verdict = verifier.verify(problem, source, mode="strict" if mode == "auto" else mode)
        if mode == "auto" and verdict.status == "rejected" and verdict.reasons \
                and verdict.reasons[0].startswith(STRICT_PYTORCH_COMPUTE):
            verdict = verifier.verify(problem, source, mode="mixed")
        return BenchEntry(problem, path, verdict)

    return _parallel(problems, one, verifier, progress, claims)


def run_search_bench(
    problems: list[Problem],
    verifier: Verifier | list[Verifier],
    search_config,
    out: Path,
    progress: Callable[[int, int, BenchEntry], None] | None = None,
    policies: list | None = None,
    claims: Claims | None = None,
) -> list[BenchEntry]:
    """Convert every problem with the test-time search; the winning modules land in
    `out/candidates/`, so a later `--candidates` run can re-verify them. Several verifiers (one
    per GPU): each problem's search runs on one of them. With `claims`, only the problems this
    process claims first."""
    from .search import Search

    folder = out / "candidates"
    folder.mkdir(parents=True, exist_ok=True)

    def one(problem: Problem, verifier: Verifier) -> BenchEntry:
        search = Search(problem, verifier, search_config, policies=policies)
        for _ in search.run():
            pass
        r = search.result
        path = None
        if r.correct:
            path = folder / f"{problem.name}.py"
            path.write_text(r.source)
        # the entry's verdict: the winner's, else the last whole-module attempt's
        verdict = r.verdict or next((a.verdict for a in reversed(r.attempts) if a.fragment == "whole module"), None)
        return BenchEntry(problem, path, verdict, round(r.seconds, 2), r.plan, r.reason)

    return _parallel(problems, one, verifier, progress, claims)


def _parallel(problems, one, verifiers, progress, claims: Claims | None = None) -> list[BenchEntry]:
    """`one(problem, verifier)` for every problem (every one `claims` gives this process), as many
    at once as the verifiers have workers, each problem on a free verifier."""
    verifiers = verifiers if isinstance(verifiers, list) else [verifiers]
    slots = VerifierSlots(verifiers, verifiers[0].config.workers)
    entries: list[BenchEntry | None] = [None] * len(problems)
    done = 0
    lock = threading.Lock()

    def run(i: int) -> None:
        nonlocal done
        if claims is not None and not claims.take(problems[i]):
            return  # another process runs it
        try:
            with slots.lend() as verifier:
                entry = one(problems[i], verifier)
        except Exception as e:  # one problem's failure is its own entry; the run goes on
            entry = BenchEntry(problems[i], None, None, reason=f"internal error: {describe_exception(e)}")
        with lock:
            entries[i] = entry
            done += 1
            if progress:
                progress(done, len(problems), entry)

    with ThreadPoolExecutor(max_workers=slots.size) as pool:
        list(pool.map(run, range(len(problems))))
    return [e for e in entries if e is not None]


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in values) / len(values)) if values else None


def _fast_p(speedups: list[float], correct: int, problems: int) -> dict[str, float]:
    """fast_p for each threshold, as a share of all problems (fast_0: the correct ones)."""
    return {str(p): (sum(s > p for s in speedups) if p else correct) / problems if problems else 0.0
            for p in THRESHOLDS}


def summarize(entries: list[BenchEntry]) -> dict:
    n = len(entries)
    statuses: dict[str, int] = {}
    for e in entries:
        statuses[e.status] = statuses.get(e.status, 0) + 1
    summary = {"problems": n, "correct": sum(e.correct for e in entries), "statuses": statuses}
    heavy_in_triton = [e for e in entries if e.correct and not e.verdict.heavy_ops_in_pytorch]
    summary["correct_heavy_in_triton"] = len(heavy_in_triton)
    for baseline in ("eager", "compile"):
        speedups = [getattr(e.verdict, f"speedup_{baseline}") for e in entries if e.correct]
        timed = [s for s in speedups if s is not None]
        summary[f"fast_p_{baseline}"] = _fast_p(timed, summary["correct"], n)
        own = [s for e in heavy_in_triton if (s := getattr(e.verdict, f"speedup_{baseline}")) is not None]
        summary[f"fast_p_{baseline}_heavy_in_triton"] = _fast_p(own, len(heavy_in_triton), n)
        summary[f"geomean_speedup_{baseline}"] = _geomean(timed)
        summary[f"timed_{baseline}"] = len(timed)
    graphs = [e.verdict.graph for e in entries if e.correct and e.verdict.graph]
    if graphs:  # the CUDA-graph option (VerifyConfig.cuda_graph)
        summary["graph_asked"] = len(graphs)
        summary["graph_timed"] = sum(g.candidate is not None for g in graphs)
        for baseline in ("eager", "compile"):
            summary[f"geomean_speedup_graph_{baseline}"] = _geomean(
                [x for g in graphs if (x := getattr(g, f"speedup_{baseline}")) is not None])
    times = sorted(e.verdict.elapsed_s for e in entries if e.verdict)
    summary["median_verify_s"] = times[len(times) // 2] if times else None
    searches = sorted(e.search_s for e in entries if e.search_s is not None)
    if searches:
        summary["median_search_s"] = searches[len(searches) // 2]
        summary["total_search_s"] = round(sum(searches), 1)
    return summary


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if x is None else f"{x:{spec}}{suffix}"


def report_markdown(entries: list[BenchEntry], summary: dict, title: str) -> str:
    lines = [f"# {title}", "", f"{summary['problems']} problems, {summary['correct']} correct.", ""]
    lines += ["| metric | vs eager | vs torch.compile |", "|---|---|---|"]
    for p in THRESHOLDS:
        lines.append(f"| fast_{p:g} | {summary['fast_p_eager'][str(p)]:.1%} | "
                     f"{summary['fast_p_compile'][str(p)]:.1%} |")
    if "fast_p_eager_heavy_in_triton" in summary:  # (older summaries read back lack it)
        for p in THRESHOLDS:
            lines.append(f"| fast_{p:g}, GEMM / conv / attention in Triton | "
                         f"{summary['fast_p_eager_heavy_in_triton'][str(p)]:.1%} | "
                         f"{summary['fast_p_compile_heavy_in_triton'][str(p)]:.1%} |")
    lines.append(f"| geomean speedup (correct, timed) | {_fmt(summary['geomean_speedup_eager'], '.2f', 'x')} | "
                 f"{_fmt(summary['geomean_speedup_compile'], '.2f', 'x')} |")
    if summary.get("graph_asked"):
        lines.append(f"| replayed as CUDA graphs (option; vs torch.compile mode='reduce-overhead'), "
                     f"{summary['graph_timed']} of {summary['graph_asked']} captured | "
                     f"{_fmt(summary['geomean_speedup_graph_eager'], '.2f', 'x')} | "
                     f"{_fmt(summary['geomean_speedup_graph_compile'], '.2f', 'x')} |")
    if summary.get("wall_s"):
        gpus = summary.get("gpus")
        lines.append(f"\nWall time {summary['wall_s']:.0f} s, {summary['verdicts_per_minute']:.2f} problems per "
                     f"minute{f' on {gpus} GPUs' if gpus and gpus > 1 else ''}.")
    if "median_search_s" in summary:
        lines.append(f"\nSearch time per problem: median {summary['median_search_s']:.1f} s, "
                     f"total {summary['total_search_s']:.0f} s.")
    lines += ["", "| problem | status | vs eager | vs compile | Triton share | GPU busy | s | plan or reason |",
              "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        v = e.verdict
        if v is None:
            why = e.reason or "no candidate file"
            lines.append(f"| {e.problem.name} | missing | - | - | - | - | - | {why.replace('|', '/')[:160]} |")
            continue
        reason = (v.reasons[0] if v.reasons else e.plan or "; ".join(v.flags)).replace("|", "/")[:160]
        if v.graph:
            g = v.graph
            reason += (f" (CUDA graph: {_fmt(g.speedup_eager, '.2f', 'x')} vs eager, "
                       f"{_fmt(g.speedup_compile, '.2f', 'x')} vs reduce-overhead)" if g.candidate
                       else f" (CUDA graph: {g.note[:80]})").replace("|", "/")
        seconds = e.search_s if e.search_s is not None else v.elapsed_s
        lines.append(f"| {e.problem.name} | {e.status} | {_fmt(v.speedup_eager, '.2f', 'x')} | "
                     f"{_fmt(v.speedup_compile, '.2f', 'x')} | {_fmt(v.triton_share, '.0%')} | "
                     f"{_fmt(v.gpu_busy, '.0%')} | {seconds:.1f} | {reason} |")
    return "\n".join(lines) + "\n"


def speedup_svg(entries: list[BenchEntry]) -> str:
    """Bars of log2(speedup vs eager) per problem, sorted; incorrect ones as red ticks at 0."""
    rows = sorted(
        ((e.problem.name, e.verdict.speedup_eager if e.correct else None) for e in entries),
        key=lambda r: (r[1] is None, -(r[1] or 0)),
    )
    width, bar, left, mid = 900, 14, 320, 610
    height = 40 + bar * len(rows)
    scale = 60.0  # pixels per doubling
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="14">speedup vs PyTorch eager (log scale; red: not correct)</text>',
           f'<line x1="{mid}" y1="20" x2="{mid}" y2="{height}" stroke="#444"/>']
    for i, (name, s) in enumerate(rows):
        y = 24 + i * bar
        out.append(f'<text x="{left - 4}" y="{y + 10}" text-anchor="end">{name[:48]}</text>')
        if s is None:
            out.append(f'<rect x="{mid - 2}" y="{y + 2}" width="4" height="{bar - 4}" fill="#c33"/>')
            continue
        w = max(-mid + left, min(width - mid - 40, math.log2(s) * scale))
        x = mid if w >= 0 else mid + w
        colour = "#2a7" if s >= 1 else "#e90"
        out.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{abs(w):.1f}" height="{bar - 4}" fill="{colour}"/>')
        out.append(f'<text x="{mid + max(w, 0) + 4:.1f}" y="{y + 10}">{s:.2f}x</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_report(entries: list[BenchEntry], summary: dict, out: Path, title: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "verdicts.jsonl", "w") as f:
        for e in entries:
            f.write(json.dumps(e.to_dict()) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.md").write_text(report_markdown(entries, summary, title))
    (out / "speedups.svg").write_text(speedup_svg(entries))
