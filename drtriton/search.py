"""Test-time search: DRTriton's way from a problem to its fastest verified Triton module.

    capture -> cuts into fragments (<= 5 operators)
            -> per fragment: candidates from the policies, verified alone (fragment problems);
               failures go back to the policies as feedback for the next round
            -> per cut: a plan of the best verified variant per fragment (PyTorch for the rest,
               in mixed mode), assembled and verified whole
            -> the fastest correct whole module wins (on a machine without CUDA: the first)

Bounded by a time and a candidate budget, cancellable, and observable: `Search.run()` yields
`Event`s (status lines, the text of each candidate as it is written, verdicts, the best so far,
done) that the CLI and the language server consume.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Iterator

from .capture import CaptureError
from .policy.builtin import PYTORCH, BuiltinPolicy, Candidate
from .policy.emit import Unsupported
from .policy.fragments import fragment_task
from .policy.program import Program
from .problem import Problem, ProblemError
from .verify import Verdict, Verifier


@dataclass
class Event:
    kind: str  # status | text | candidate | best | done
    data: dict


@dataclass
class Attempt:
    """One verified candidate: for a fragment, or a whole module."""

    id: int
    policy: str
    fragment: str  # the fragment's operators, or "whole module"
    plan: str
    verdict: Verdict
    seconds: float
    tokens: int | None = None  # model policies: tokens generated

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.to_dict()
        return d


@dataclass
class SearchResult:
    correct: bool
    source: str | None  # the best module, when one was verified correct
    verdict: Verdict | None
    plan: str
    policy: str | None
    attempts: list[Attempt] = field(default_factory=list)
    reason: str = ""  # why there is no correct module
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"correct": self.correct, "plan": self.plan, "policy": self.policy, "reason": self.reason,
                "verdict": self.verdict.to_dict() if self.verdict else None, "seconds": round(self.seconds, 2),
                "candidates": [a.to_dict() for a in self.attempts]}


@dataclass
class SearchConfig:
    mode: str = "strict"
    budget_s: float = 600.0
    max_candidates: int = 64
    rounds: int = 2  # fragment rounds with feedback
    stream_chunk_lines: int = 8  # lines per text event


def _faster(a: Verdict, b: Verdict | None) -> bool:
    if b is None:
        return True
    ta = a.timings.candidate.median_ms if a.timings else None
    tb = b.timings.candidate.median_ms if b.timings else None
    return ta is not None and (tb is None or ta < tb)


class Search:
    def __init__(self, problem: Problem, verifier: Verifier, config: SearchConfig | None = None,
                 policies: list | None = None, cancel: threading.Event | None = None):
        self.problem = problem
        self.verifier = verifier
        self.config = config or SearchConfig()
        self.builtin = BuiltinPolicy(verifier.device)
        self.policies = policies or []  # model-backed fragment policies (issue: model policies)
        self.cancel = cancel or threading.Event()
        self.attempts: list[Attempt] = []
        self.started = time.monotonic()
        self.cuda = verifier.device == "cuda"

    # -- budget ------------------------------------------------------------------------------
    def _left(self) -> float:
        return self.config.budget_s - (time.monotonic() - self.started)

    def _exhausted(self) -> bool:
        return self.cancel.is_set() or self._left() <= 0 or len(self.attempts) >= self.config.max_candidates

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> Iterator[Event]:
        yield Event("status", {"message": f"capturing {self.problem.class_name}"})
        try:
            graph = self.verifier.capture(self.problem, cancel=self.cancel)
        except (CaptureError, ProblemError) as e:
            yield from self._done(None, None, "", f"cannot capture the module: {e}")
            return
        program = Program(graph)
        covered = sum(1 for n in program.nodes if n.op is not None)
        yield Event("status", {"message": f"captured {len(program.nodes)} operators "
                                          f"({covered} in the vocabulary)"})
        self.best: tuple[Candidate, Verdict] | None = None
        cuts = self.builtin.cuts(program)
        fragment_choice: dict[str, int | None] = {}
        for cut_index, frags in enumerate(cuts):
            cut = "fused" if cut_index == 0 else "one operator per kernel"
            if self._exhausted() and cut_index > 0:
                break
            yield Event("status", {"message": f"plan {cut_index + 1}/{len(cuts)} ({cut}): "
                                              + "; ".join(f.label for f in frags if f.kind != 'view')})
            # 1. the plan as first written (each fragment's first variant), verified whole
            first = {i: (0 if self.builtin.variants(program, f) else PYTORCH) for i, f in enumerate(frags)}
            verdict = yield from self._plan(program, frags, first, cut, cut_index)
            if verdict is not None and verdict.correct and not self.cuda:
                break  # no timing without CUDA: the first correct module wins
            refinable = any(self.builtin.variants(program, f) > 1 for f in frags)
            if (verdict is not None and verdict.correct and not refinable) or self._exhausted():
                continue
            # 2. per fragment: variants verified alone, the fastest correct kept (this also
            #    finds which fragment failed, and lets mixed mode leave just that one to PyTorch)
            choices: dict[int, int | None] = {}
            for i, frag in enumerate(frags):
                if frag.kind in ("view", "torch"):
                    continue
                if self.builtin.variants(program, frag) == 0:
                    choices[i] = PYTORCH
                    continue
                try:
                    task = fragment_task(program, frag, self.problem)
                except Exception:  # a fragment we cannot pose alone: keep its first variant
                    choices[i] = 0
                    continue
                if task.key not in fragment_choice:
                    fragment_choice[task.key] = yield from self._fragment(program, frag, task)
                choices[i] = fragment_choice[task.key]
            if any(choices.get(i, first[i]) != first[i] for i in first):
                verdict = yield from self._plan(program, frags, {**first, **choices}, cut, cut_index)
                if verdict is not None and verdict.correct and not self.cuda:
                    break
        if self.best is None:
            yield from self._done(None, None, "", self._why_none())
        else:
            yield from self._done(self.best[0], self.best[1], self.best[0].description, "")

    def _plan(self, program: Program, frags, choices: dict, cut: str, cut_index: int) -> Iterator[Event]:
        """Assemble a plan from per-fragment choices and verify it whole; None if this mode
        cannot run it."""
        try:
            cand = self.builtin.assemble(self.problem, program, frags, lambda i, f: choices.get(i, 0),
                                         self.config.mode, cut)
        except Unsupported as e:
            yield Event("status", {"message": f"plan {cut_index + 1} not possible in {self.config.mode} mode: {e}"})
            return None
        verdict = yield from self._verify(self.problem, cand, "whole module")
        if verdict.correct and (self.best is None or _faster(verdict, self.best[1])):
            self.best = (cand, verdict)
            yield Event("best", {"source": cand.source, "plan": cand.description,
                                 "summary": verdict.summary, "verdict": verdict.to_dict()})
        return verdict

    def _fragment(self, program: Program, frag, task) -> Iterator[Event]:
        """Verify the fragment's variants alone; return the fastest correct one (first on CPU),
        or PYTORCH when none is correct."""
        chosen, chosen_verdict = PYTORCH, None
        feedback: list[Attempt] = []
        for round_ in range(self.config.rounds):
            proposals = self._proposals(task, program, frag, round_, feedback)
            if not proposals:
                break
            for variant, cand in proposals:
                if self._exhausted():
                    return chosen if chosen is not PYTORCH else 0
                verdict = yield from self._verify(task.problem, cand, frag.label, quick=True)
                feedback.append(self.attempts[-1])
                if verdict.correct and (chosen_verdict is None or _faster(verdict, chosen_verdict)):
                    chosen, chosen_verdict = variant, verdict
                    if not self.cuda:
                        return chosen
        return chosen

    def _proposals(self, task, program, frag, round_: int, feedback) -> list[tuple[int, Candidate]]:
        """Candidates for a fragment in this round. The built-in policy offers its variants in
        the first round; model policies (later) see the feedback of earlier rounds."""
        if round_ > 0:
            return []
        out = []
        sub = Program(task.graph)
        sub_frags = self.builtin.cuts(sub)[0]  # the fused cut, with the anchors' folding
        for variant in range(self.builtin.variants(program, frag)):
            try:
                cand = self.builtin.assemble(task.problem, sub, sub_frags, lambda i, f, v=variant: v, "strict")
            except Unsupported:
                continue
            out.append((variant, cand))
        return out

    def _verify(self, problem: Problem, cand: Candidate, fragment: str, quick: bool = False) -> Iterator[Event]:
        attempt_id = len(self.attempts) + 1
        lines = cand.source.splitlines(keepends=True)
        step = self.config.stream_chunk_lines
        for start in range(0, len(lines), step):
            yield Event("text", {"candidate": attempt_id, "fragment": fragment, "policy": cand.policy,
                                 "text": "".join(lines[start:start + step]), "first": start == 0,
                                 "last": start + step >= len(lines)})
        t0 = time.monotonic()
        verdict = self.verifier.verify(problem, cand.source, cancel=self.cancel, quick=quick,
                                       mode="strict" if quick else self.config.mode)
        attempt = Attempt(attempt_id, cand.policy, fragment, cand.description, verdict,
                          round(time.monotonic() - t0, 2))
        self.attempts.append(attempt)
        yield Event("candidate", {"id": attempt_id, "fragment": fragment, "policy": cand.policy,
                                  "plan": cand.description, "status": verdict.status,
                                  "summary": verdict.summary, "seconds": attempt.seconds})
        return verdict

    def _why_none(self) -> str:
        if self.cancel.is_set():
            return "cancelled"
        wholes = [a for a in self.attempts if a.fragment == "whole module"]
        if not wholes:
            return (f"no plan is possible in {self.config.mode} mode"
                    if self._left() > 0 else "the time budget ran out before a plan was verified")
        last = wholes[-1].verdict
        return f"no candidate was correct; last: {last.summary}"

    def _done(self, cand: Candidate | None, verdict: Verdict | None, plan: str, reason: str) -> Iterator[Event]:
        result = SearchResult(correct=verdict is not None and verdict.correct,
                              source=cand.source if cand else None, verdict=verdict, plan=plan,
                              policy=cand.policy if cand else None, attempts=self.attempts, reason=reason,
                              seconds=time.monotonic() - self.started)
        self.result = result
        yield Event("done", {"result": result})
