"""Test-time search: DRTriton's way from a problem to its fastest verified Triton module.

    capture -> cuts into fragments (<= 5 operators)
            -> the plan as first written (built-in policy), verified whole
            -> per fragment: candidates from the policies, verified alone (fragment problems);
               a model sees the verdicts of its earlier attempts in the next round
            -> plans of the best verified choice per fragment (PyTorch for the rest, in mixed
               mode), assembled and verified whole
            -> the fastest correct whole module wins (on a machine without CUDA: the first)

A program small enough to be one fragment is also offered to the model policies whole. Model
candidates compete with the built-in policy's (the baseline, unless `builtin=False`).

Bounded by a time and a candidate budget, cancellable, and observable: `Search.run()` yields
`Event`s (status lines, the text of each candidate as it is written, verdicts, the best so far,
done) that the CLI and the language server consume.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Iterator

from .capture import CaptureError
from .errors import describe_exception
from .policy.builtin import LIBRARY, PYTORCH, BuiltinPolicy, Candidate, first_choices
from .policy.compose import Foreign
from .policy.emit import Unsupported
from .policy.fold import fold_linear_reductions
from .policy.fragments import fragment_task
from .policy.models import ModelError, ModelPolicy
from .policy.program import MAX_FRAGMENT_OPS, VIEWS, Program
from .problem import Problem, ProblemError
from .prompting import build_messages, parse_reply
from .threads import serialize_ast_parsing
from .verify import Cancelled, Verdict, Verifier
from .verify.verdict import FAILED

WHOLE = "whole module"


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
    seconds: float  # verification
    tokens: int | None = None  # model policies: tokens generated
    generation_s: float | None = None  # model policies: time to generate
    source: str = ""  # what was verified (a model's whole reply when it held no code)

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
    policy: str | None  # who wrote the winner ("builtin", "openai", "builtin+openai", ...)
    attempts: list[Attempt] = field(default_factory=list)
    reason: str = ""  # why there is no correct module
    notes: list[str] = field(default_factory=list)  # e.g. a model endpoint that failed
    seconds: float = 0.0
    fallbacks: list[str] = field(default_factory=list)  # fragments plans left to PyTorch, and why
    mode: str = ""  # the mode the result was found in: strict or mixed (auto tries strict first)

    def to_dict(self) -> dict:
        return {"correct": self.correct, "mode": self.mode, "plan": self.plan, "policy": self.policy, "reason": self.reason,
                "notes": self.notes, "fallbacks": self.fallbacks, "verdict": self.verdict.to_dict() if self.verdict else None,
                "seconds": round(self.seconds, 2), "candidates": [a.to_dict() for a in self.attempts]}


@dataclass
class SearchConfig:
    mode: str = "strict"  # or mixed, or auto: strict first, then mixed for what is left
    budget_s: float = 600.0
    max_candidates: int = 64
    rounds: int = 2  # model rounds per fragment, each with the verdicts of the last
    builtin: bool = True  # the built-in policy takes part (the baseline to beat)
    stream_chunk_lines: int = 8  # lines per text event for the built-in policy's code
    quick: bool = False  # every check quick (timed against eager only): training data, not users
    cuda_graph: bool | None = None  # full checks also time the module as a CUDA graph (None: the verifier's setting)
    direct_launch: bool = True  # the built-in policy's modules launch through _DirectLaunch (policy/launch.py)


def _faster(a: Verdict, b: Verdict | None) -> bool:
    """Whether `a` is the faster candidate: by its speed against the reference timed in the same
    check (checks may run on different GPUs of a VerifierGroup, or under other load), else by
    its own time."""
    if b is None:
        return True
    if a.speedup_eager is not None and b.speedup_eager is not None:
        return a.speedup_eager > b.speedup_eager
    ta = a.timings.candidate.median_ms if a.timings else None
    tb = b.timings.candidate.median_ms if b.timings else None
    return ta is not None and (tb is None or ta < tb)


class _Closed(Cancelled):
    """The search was closed: a job that was about to start a check stops instead (outside a
    fragment job, what a check cancelled under way raises)."""


def _drain(gen: Iterator[Event], put) -> object:
    """Run a generator to its end in this thread, handing its events to `put`; its result."""
    while True:
        try:
            put(next(gen))
        except StopIteration as done:
            return done.value


def _no_code(reason: str) -> Verdict:
    """The record of a reply that held nothing to verify."""
    return Verdict(correct=False, status=FAILED, reasons=[f"no usable code: {reason}"])


class Search:
    def __init__(self, problem: Problem, verifier: Verifier, config: SearchConfig | None = None,
                 policies: list[ModelPolicy] | None = None, cancel: threading.Event | None = None):
        self.problem = problem
        self.verifier = verifier
        self.config = config or SearchConfig()
        self.builtin = BuiltinPolicy(verifier.device, direct_launch=self.config.direct_launch)
        self.models = list(policies or [])
        if not self.config.builtin and not self.models:
            raise ValueError("the built-in policy is switched off and no model policy is given")
        self.cancel = cancel or threading.Event()
        self.attempts: list[Attempt] = []
        self.notes: list[str] = []
        self.fallbacks: list[str] = []  # fragments a plan left to PyTorch, and why
        self._unplanned = ""  # why the last plan could not be assembled
        self.best: tuple[str, str, str, Verdict] | None = None  # (source, plan, policy, verdict)
        self.started = time.monotonic()
        self.cuda = verifier.device == "cuda"
        self._ids = itertools.count(1)
        self._models_asked = False
        self._models_per_fragment = True  # False when the models see the program whole

    # -- budget ------------------------------------------------------------------------------
    def _left(self) -> float:
        return self.config.budget_s - (time.monotonic() - self.started)

    def _exhausted(self) -> bool:
        return self.cancel.is_set() or self._left() <= 0 or len(self.attempts) >= self.config.max_candidates

    def _settled(self) -> bool:
        """Without CUDA nothing is timed: the first correct module ends the search (once the
        model policies, when there are any, have had their turn)."""
        return self.best is not None and not self.cuda and (not self.models or self._models_asked)

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> Iterator[Event]:
        """The search's events, ending with `done`. An internal error ends the search with the
        best module found so far and the error as its reason; it never escapes to the caller."""
        if self.config.mode == "auto":
            yield from self._auto()
            return
        try:
            yield from self._run()
        except Exception as e:
            note = f"internal error: {describe_exception(e)}"
            self.notes.append(note)
            yield Event("status", {"message": note})
            yield from self._done(note if self.best is None else "")

    def _auto(self) -> Iterator[Event]:
        """Strict first: every operator in Triton. When no such module verifies, mixed mode
        with the time that is left, where PyTorch keeps what Triton does not cover (the result
        lists those operators and the verdict the share of time in Triton)."""
        strict = self._in_mode("strict", self.config.budget_s)
        yield from (e for e in strict.run() if e.kind != "done")
        first = strict.result
        left = self.config.budget_s - first.seconds
        if first.correct or self.cancel.is_set() or left <= 0:
            self.result = first
            yield Event("done", {"result": first})
            return
        yield Event("status", {"message": f"strict mode found no module ({first.reason}); mixed mode: "
                                          "PyTorch keeps what Triton does not cover"})
        mixed = self._in_mode("mixed", left)
        yield from (e for e in mixed.run() if e.kind != "done")
        second = mixed.result
        self.result = replace(second, attempts=first.attempts + second.attempts, notes=first.notes + second.notes,
                              seconds=first.seconds + second.seconds,
                              reason=second.reason and f"strict: {first.reason}; mixed: {second.reason}")
        yield Event("done", {"result": self.result})

    def _in_mode(self, mode: str, budget_s: float) -> "Search":
        search = Search(self.problem, self.verifier, replace(self.config, mode=mode, budget_s=budget_s),
                        policies=self.models, cancel=self.cancel)
        search._ids = self._ids  # candidate ids run on across both modes
        return search

    def _run(self) -> Iterator[Event]:
        yield Event("status", {"message": f"capturing {self.problem.class_name}"})
        if not self.config.quick:  # the reference's torch.compile, off the first verdict's path
            self.verifier.warm_compile(self.problem)
        try:
            graph = self.verifier.capture(self.problem, cancel=self.cancel)
        except (CaptureError, ProblemError) as e:
            yield from self._done(f"cannot capture the module: {e}")
            return
        program = Program(graph)
        for note in program.notes:  # what the program gave up on (the result's notes keep it)
            self.notes.append(note)
            yield Event("status", {"message": note})
        covered = sum(1 for n in program.nodes if n.op is not None)
        yield Event("status", {"message": f"captured {len(program.nodes)} operators "
                                          f"({covered} in the vocabulary)"})
        small = sum(n.target not in VIEWS for n in program.nodes) <= MAX_FRAGMENT_OPS
        self._models_per_fragment = not small  # a small program is one fragment: shown whole
        if self.config.builtin:  # model policies join in per fragment (large programs)
            try:
                folded, folds = fold_linear_reductions(graph)
                rewritten = Program(folded, rewrites=folds) if folds else None
            except Exception as e:  # a rewrite that cannot apply must not cost the conversion
                folds, rewritten = [], None
                yield Event("status", {"message": f"no algebraic rewrite ({type(e).__name__}: {e})"})
            if rewritten is not None:  # the rewritten program first; as captured if it fails
                yield Event("status", {"message": "rewrote: " + "; ".join(folds)})
                yield from self._cuts(rewritten)
            if not folds or self.best is None:
                yield from self._cuts(program)
        if self.models and small and not self._settled():
            yield from self._whole(program)
        if self.models and not self.config.builtin and not small and not self._settled():
            yield from self._cuts(program, builtin=False)
        yield from self._done(self._why_none() if self.best is None else "")

    def _cuts(self, program: Program, builtin: bool = True) -> Iterator[Event]:
        fragment_choice: dict[str, object] = {}
        cuts = self.builtin.cuts(program)
        for cut_index, frags in enumerate(cuts):
            cut = "fused" if cut_index == 0 else "one operator per kernel"
            if self._settled() or (self._exhausted() and (cut_index > 0 or self.best is not None)):
                return
            labels = [f.label for f in frags if f.kind != "view"]
            yield Event("status", {"message": f"plan {cut_index + 1}/{len(cuts)} ({cut}): " + "; ".join(labels),
                                   "fragments": labels})
            options = {i: self.builtin.choices(program, f, self.config.mode) if builtin else [] for i, f in enumerate(frags)}
            first = first_choices(frags, options)
            verdict = None
            if builtin:  # 1. the plan as first written, verified whole
                verdict = yield from self._plan(program, frags, first, cut, cut_index)
                if self._settled():
                    return
                refinable = (self.models and self._models_per_fragment) or any(len(o) > 1 for o in options.values())
                if (verdict is not None and verdict.correct and not refinable) or self._exhausted():
                    continue
            # 2. per fragment: candidates verified alone, the fastest correct kept (this also
            #    finds which fragment failed, and lets mixed mode leave just that one to PyTorch)
            #    (fragments checked at once, as many as the verifier has workers)
            tasks: dict[int, object] = {}
            for i, frag in enumerate(frags):
                if frag.kind in ("view", "torch"):
                    continue
                try:
                    tasks[i] = fragment_task(program, frag, self.problem)
                except Exception as e:  # a fragment we cannot pose alone: keep its first variant
                    # (a status line, not a note: notes are failures the editor warns about)
                    yield Event("status", {"message": f"{frag.label}: not checked alone ({describe_exception(e)})"})
            todo: dict[str, int] = {}  # each fragment problem once: its first fragment
            for i, t in tasks.items():
                if t.key not in fragment_choice:
                    todo.setdefault(t.key, i)
            found = yield from self._at_once([
                (lambda i=i: self._fragment(program, frags[i], tasks[i], builtin, first[i])) for i in todo.values()])
            for key, i, choice in zip(todo, todo.values(), found):
                fragment_choice[key] = first[i] if choice is None else choice
            choices = {i: fragment_choice[t.key] for i, t in tasks.items()}
            if any(choices.get(i, first[i]) != first[i] for i in first):
                yield from self._plan(program, frags, {**first, **choices}, cut, cut_index)

    def _at_once(self, jobs: list) -> Iterator[Event]:
        """Run generator jobs (each a callable returning a generator of events and a result),
        up to the verifier's capacity at once, yielding their events as they come; returns their
        results in order. A job that raises is reported and its result is None: one fragment's
        failure never ends the search. Model policies take their turns one job at a time."""
        width = min(len(jobs), getattr(self.verifier, "capacity", 1))
        if self.models and self._models_per_fragment:
            width = 1
        results: list = [None] * len(jobs)
        if width <= 1:
            for n, job in enumerate(jobs):
                results[n] = yield from self._guarded(job)
            return results
        events: queue.Queue = queue.Queue()
        pending = iter(enumerate(jobs))
        lock = threading.Lock()

        def drive() -> None:
            try:
                while not self.cancel.is_set():
                    with lock:
                        item = next(pending, None)
                    if item is None:
                        return
                    n, job = item
                    results[n] = _drain(self._guarded(job), events.put)
            finally:
                events.put(None)

        serialize_ast_parsing()  # the threads write and check modules through `ast`
        for k in range(width):
            threading.Thread(target=drive, name=f"drtriton-fragment-{k}", daemon=True).start()
        running = width
        try:
            while running:
                event = events.get()
                if event is None:
                    running -= 1
                else:
                    yield event
        except GeneratorExit:  # the caller stopped listening: checks in flight are cancelled, none starts
            self.cancel.set()
            raise
        return results

    def _guarded(self, job) -> Iterator[Event]:
        try:
            return (yield from job())
        except _Closed:
            return None
        except Exception as e:
            note = f"a fragment's check failed: {describe_exception(e)}"
            self.notes.append(note)
            yield Event("status", {"message": note})
            return None

    def _fragment(self, program: Program, frag, task, builtin: bool, planned) -> Iterator[Event]:
        """The fastest correct choice for a fragment (the first one without CUDA), or PYTORCH;
        `planned` (its choice in the plan as first written) when the budget runs out first."""
        chosen, chosen_verdict = PYTORCH, None

        def better(verdict: Verdict) -> bool:
            return verdict.correct and (chosen_verdict is None or _faster(verdict, chosen_verdict))

        if builtin:
            sub = Program(task.graph)
            sub_frags = self.builtin.cuts(sub)[0]  # the fused cut, with the anchors' folding
            variants = self.builtin.choices(program, frag, self.config.mode)
            unwritten = []
            for variant in variants:
                if self._exhausted():
                    yield Event("status", {"message": f"{frag.label}: the search's budget ran out before its checks"})
                    return chosen if chosen is not PYTORCH else planned
                try:  # only this variant: in strict mode no fragment falls back to PyTorch
                    cand = self.builtin.assemble(task.problem, sub, sub_frags, lambda i, f, v=variant: v,
                                                 "mixed" if variant == LIBRARY else "strict")
                except Unsupported as e:
                    unwritten.append(str(e))
                    continue
                except Exception as e:  # a bug in one variant's template costs that variant only
                    self.notes.append(f"{frag.label}: a variant could not be written: {describe_exception(e)}")
                    continue
                verdict = yield from self._builtin_attempt(task.problem, cand, frag.label, quick=True)
                if better(verdict):
                    chosen, chosen_verdict = variant, verdict
                    if not self.cuda:
                        break
            if len(unwritten) == len(variants):  # nothing to check alone: say why
                yield Event("status", {"message": f"{frag.label}: no variant to check alone "
                                                  f"({'; '.join(unwritten) or 'none'})"})
        for policy in (self.models if self._models_per_fragment else []):
            history: list[tuple[str, Verdict]] = []
            for _ in range(self.config.rounds):  # rounds go on until this policy gets it right
                if self._exhausted():
                    break
                results = yield from self._model_round(policy, task.problem, "ModelNew", frag.label, history,
                                                       quick=True, mode="strict")
                for code, verdict in results:
                    if code is not None and better(verdict):
                        chosen = Foreign(code, "ModelNew", policy.name, task.inputs, task.outputs)
                        chosen_verdict = verdict
                if not self.cuda and any(v.correct for _, v in results):
                    break
        return chosen

    def _whole(self, program: Program) -> Iterator[Event]:
        """The whole program, one fragment, offered to each model policy for a few rounds."""
        for policy in self.models:
            history: list[tuple[str, Verdict]] = []
            for _ in range(self.config.rounds):  # rounds go on until this policy gets it right
                if self._exhausted():
                    return
                results = yield from self._model_round(policy, self.problem, self.problem.candidate_class, WHOLE,
                                                       history, quick=False, mode=self.config.mode)
                for code, verdict in results:
                    if code is not None:
                        yield from self._consider(code, f"{WHOLE}: by the {policy.name} policy", policy.name, verdict)
                if not self.cuda and any(v.correct for _, v in results):
                    break

    # -- models --------------------------------------------------------------------------------
    def _model_round(self, policy: ModelPolicy, problem: Problem, candidate_class: str, fragment: str,
                     history: list, quick: bool, mode: str) -> Iterator[Event]:
        """Ask `policy` once (several samples), stream its text, verify what it wrote; returns
        [(code or None, verdict)] and extends `history` with (reply, verdict)."""
        messages = build_messages(problem.source, candidate_class, mode, history)
        ids = [next(self._ids) for _ in range(policy.samples)]
        chunks: queue.Queue = queue.Queue()
        outcome: dict = {}

        def work():
            try:
                outcome["generations"] = policy.generate(messages, lambda i, t: chunks.put((i, t)), self.cancel)
            except ModelError as e:
                outcome["error"] = str(e)
            except Exception as e:  # a bug in a model stack must not kill the search
                outcome["error"] = f"{type(e).__name__}: {e}"
            finally:
                chunks.put(None)

        thread = threading.Thread(target=work, name=f"drtriton-{policy.name}", daemon=True)
        thread.start()
        started = set()
        while True:
            item = chunks.get()
            if item is None:
                break
            i, text = item
            yield Event("text", {"candidate": ids[i], "fragment": fragment, "policy": policy.name, "text": text,
                                 "first": i not in started, "last": False})
            started.add(i)
        thread.join()
        self._models_asked = True
        if "error" in outcome:
            note = f"{policy.name} policy: {outcome['error']}"
            self.notes.append(note)
            yield Event("status", {"message": note})
            return []
        results = []
        for attempt_id, gen in zip(ids, outcome["generations"]):
            yield Event("text", {"candidate": attempt_id, "fragment": fragment, "policy": policy.name, "text": "",
                                 "first": False, "last": True})
            parsed = parse_reply(gen.text, candidate_class)
            if parsed.ok:
                verdict = yield from self._verify(problem, parsed.code, policy.name, f"by the {policy.name} policy",
                                                  fragment, quick, attempt_id, gen.tokens, gen.seconds, mode)
            else:
                why = parsed.error + (f" ({gen.error})" if gen.error else "")
                verdict = _no_code(why)
                yield from self._record(attempt_id, policy.name, fragment, "", verdict, 0.0, gen.tokens, gen.seconds,
                                        source=gen.text)
            history.append((gen.text, verdict))
            results.append((parsed.code if parsed.ok else None, verdict))
        return results

    # -- verification --------------------------------------------------------------------------
    def _plan(self, program: Program, frags, choices: dict, cut: str, cut_index: int) -> Iterator[Event]:
        """Assemble a plan from per-fragment choices and verify it whole; None if this mode
        cannot run it."""
        try:
            cand = self.builtin.assemble(self.problem, program, frags, lambda i, f: choices.get(i, 0),
                                         self.config.mode, cut)
        except Unsupported as e:
            yield Event("status", {"message": f"plan {cut_index + 1} not possible in {self.config.mode} mode: {e}"})
            self._unplanned = str(e)
            return None
        for note in cand.notes:  # fragments left to PyTorch, and why: the report shows them
            if note not in self.fallbacks:
                self.fallbacks.append(note)
                yield Event("status", {"message": note})
        verdict = yield from self._builtin_attempt(self.problem, cand, WHOLE)
        yield from self._consider(cand.source, cand.description, cand.policy, verdict)
        return verdict

    def _consider(self, source: str, plan: str, policy: str, verdict: Verdict) -> Iterator[Event]:
        if verdict.correct and (self.best is None or _faster(verdict, self.best[3])):
            self.best = (source, plan, policy, verdict)
            yield Event("best", {"source": source, "plan": plan, "policy": policy,
                                 "summary": verdict.summary, "verdict": verdict.to_dict()})

    def _builtin_attempt(self, problem: Problem, cand: Candidate, fragment: str, quick: bool = False) -> Iterator[Event]:
        attempt_id = next(self._ids)
        lines = cand.source.splitlines(keepends=True)
        step = self.config.stream_chunk_lines
        for start in range(0, len(lines), step):
            yield Event("text", {"candidate": attempt_id, "fragment": fragment, "policy": cand.policy,
                                 "text": "".join(lines[start:start + step]), "first": start == 0,
                                 "last": start + step >= len(lines)})
        return (yield from self._verify(problem, cand.source, cand.policy, cand.description, fragment, quick,
                                        attempt_id, mode="strict" if quick and not cand.pytorch_compute
                                        else self.config.mode))

    def _verify(self, problem: Problem, source: str, policy: str, plan: str, fragment: str, quick: bool,
                attempt_id: int, tokens: int | None = None, generation_s: float | None = None,
                mode: str | None = None) -> Iterator[Event]:
        if self.cancel.is_set():  # closed while this job ran on in its thread: no new check starts
            raise _Closed()
        t0 = time.monotonic()
        verdict = self.verifier.verify(problem, source, cancel=self.cancel, quick=quick or self.config.quick,
                                       mode=mode or self.config.mode, cuda_graph=self.config.cuda_graph)
        yield from self._record(attempt_id, policy, fragment, plan, verdict, time.monotonic() - t0, tokens, generation_s,
                                source=source)
        return verdict

    def _record(self, attempt_id, policy, fragment, plan, verdict, seconds, tokens, generation_s,
                source: str = "") -> Iterator[Event]:
        attempt = Attempt(attempt_id, policy, fragment, plan, verdict, round(seconds, 2), tokens,
                          None if generation_s is None else round(generation_s, 2), source)
        self.attempts.append(attempt)
        yield Event("candidate", {"id": attempt_id, "fragment": fragment, "policy": policy, "plan": plan,
                                  "status": verdict.status, "summary": verdict.summary,
                                  "seconds": attempt.seconds, "tokens": tokens})

    # -- the end -------------------------------------------------------------------------------
    def _why_none(self) -> str:
        if self.cancel.is_set():
            return "cancelled"
        wholes = [a for a in self.attempts if a.fragment == WHOLE]
        if not wholes:
            why = f": {self._unplanned}" if self._unplanned else ""
            return (f"no plan is possible in {self.config.mode} mode{why}"
                    if self._left() > 0 else "the time budget ran out before a plan was verified")
        return f"no candidate was correct; last: {wholes[-1].verdict.summary}"

    def _done(self, reason: str) -> Iterator[Event]:
        source, plan, policy, verdict = self.best or (None, "", None, None)
        self.result = SearchResult(correct=verdict is not None, source=source, verdict=verdict, plan=plan,
                                   policy=policy, attempts=self.attempts, reason=reason, notes=self.notes,
                                   seconds=time.monotonic() - self.started, fallbacks=self.fallbacks,
                                   mode=self.config.mode)
        yield Event("done", {"result": self.result})
