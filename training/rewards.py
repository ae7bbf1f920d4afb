"""RL rewards from the verifier: is a completion correct, and how much faster than eager.

One verification per completion serves both reward functions (TRL calls them one after the
other with the same completions). A batch's completions are verified concurrently by the
verifier's worker pool, which can live on other GPUs than training (`VerifyConfig.gpus`).
Completions with no usable code get correctness 0 without reaching a worker.

`early(text, source, class)` starts a completion's verification before the reward functions ask
(the sampler calls it as each rollout ends, while the longer ones still decode); the reward
functions then wait only for what is left. A completion is known by its text, so an early start
whose text differs from the one the trainer decodes is simply not used.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from drtriton.problem import Problem, from_source
from drtriton.prompting import parse_reply
from drtriton.verify import Verdict, Verifier


def completion_text(completion) -> str:
    """TRL hands conversational completions as [{"role": "assistant", "content": ...}]."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return str(completion)


class VerifierRewards:
    def __init__(self, verifier: Verifier, mode: str = "strict", quick: bool = True):
        self.verifier = verifier
        self.mode = mode
        self.quick = quick  # timed against eager only (the speed reward's reference); False: full checks
        self.pool = ThreadPoolExecutor(max_workers=verifier.config.workers, thread_name_prefix="drtriton-reward")
        self._verdicts: dict[str, Verdict] = {}
        self._started: dict[str, Future] = {}  # verifications under way (early starts included)
        self._problems: dict[str, Problem] = {}
        self._lock = threading.Lock()
        self.seconds = 0.0  # time the reward functions waited for verdicts (for the step-time breakdown)
        self.verified = 0
        self.early_used = 0  # verdicts started early that a reward function then used
        # the batch's slowest verification and where its time went (phase -> s): what a step
        # that waits long for its rewards waits for
        self.slowest: dict = {}

        # TRL names reward functions by __name__
        def correctness(prompts, completions, problem_source, problem_class, **kwargs):
            return [1.0 if v.correct else 0.0 for v in self.verdicts(completions, problem_source, problem_class)]

        def speed(prompts, completions, problem_source, problem_class, **kwargs):
            """log(t_eager / t_candidate) for correct, timed completions; None otherwise (TRL
            leaves None out of the means; on a CPU nothing is timed)."""
            out = []
            for v in self.verdicts(completions, problem_source, problem_class):
                out.append(math.log(v.speedup_eager) if v.correct and v.speedup_eager else None)
            return out

        self.functions = [correctness, speed]

    def _problem(self, source: str, class_name: str) -> Problem:
        key = hashlib.sha1(f"{class_name}\0{source}".encode()).hexdigest()
        if key not in self._problems:
            self._problems[key] = from_source(source, class_name, name=class_name)
        return self._problems[key]

    @staticmethod
    def _key(text: str, source: str, cls: str) -> str:
        return hashlib.sha1(f"{cls}\0{source}\0{text}".encode()).hexdigest()

    def early(self, text: str, source: str, cls: str) -> None:
        """Start verifying a completion now (the reward functions will ask for it soon)."""
        key = self._key(text, source, cls)
        with self._lock:
            if key not in self._verdicts and key not in self._started:
                self._started[key] = self.pool.submit(self._verify, text, source, cls)

    def verdicts(self, completions, sources, classes) -> list[Verdict]:
        keys, jobs = [], {}
        for completion, source, cls in zip(completions, sources, classes):
            text = completion_text(completion)
            key = self._key(text, source, cls)
            keys.append(key)
            if key not in self._verdicts:
                jobs[key] = (text, source, cls)
        started = time.monotonic()
        with self._lock:
            if jobs:  # a new batch: keep only its verdicts (the second reward function reads them), so
                current = set(keys)  # the cache stays one batch long over a long run
                self._verdicts = {k: v for k, v in self._verdicts.items() if k in current}
                for key, fut in list(self._started.items()):
                    if key not in current:  # started early for a text the trainer never asked for
                        fut.cancel()
                        del self._started[key]
            early = sum(key in self._started for key in jobs)
            for key, job in jobs.items():
                if key not in self._started:
                    self._started[key] = self.pool.submit(self._verify, *job)
            futures = {key: self._started[key] for key in jobs}
        for key, fut in futures.items():
            verdict = fut.result()
            with self._lock:
                self._verdicts[key] = verdict
                self._started.pop(key, None)
        if futures:
            slow = max((self._verdicts[k] for k in futures), key=lambda v: v.elapsed_s)
            self.slowest = {"s": slow.elapsed_s, "status": slow.status, **slow.phases_s}
        self.seconds += time.monotonic() - started
        self.verified += len(futures)
        self.early_used += early
        return [self._verdicts[k] for k in keys]

    def _verify(self, text: str, source: str, cls: str) -> Verdict:
        """A failed verdict, never an exception: one rollout that breaks the verifier (or a
        problem that does not load) must not abort the step of the other rollouts."""
        try:
            problem = self._problem(source, cls)
            parsed = parse_reply(text, problem.candidate_class)
            if not parsed.ok:
                return Verdict(correct=False, status="failed", reasons=[f"no usable code: {parsed.error}"])
            return self.verifier.verify(problem, parsed.code, mode=self.mode, quick=self.quick)
        except Exception as exc:  # noqa: BLE001 - reported in the verdict, the step goes on
            return Verdict(correct=False, status="failed", reasons=[f"verification failed: {type(exc).__name__}: {exc}"])

    def forget(self) -> None:
        """Drop cached verdicts (each step's completions are new)."""
        with self._lock:
            self._verdicts.clear()
            for fut in self._started.values():
                fut.cancel()
            self._started.clear()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
