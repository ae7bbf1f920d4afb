"""The verifier: one candidate source against one problem, to a `Verdict`.

    static checks  ->  reference prepared (reference worker)
                   ->  candidate loaded (candidate worker)
                   ->  trials: inputs from secret seeds, run, compare in the reference worker
                   ->  (full checks) a trial with another batch size, where the reference takes it
                   ->  timing on CUDA (exclusive GPU): new inputs for every candidate call,
                       some calls repeated (a cache shows as speed), random timed outputs
                       compared with the reference
                   ->  re-checks: new values written into tensors the candidate has seen
                   ->  Verdict

Only this module decides what counts as correct; the workers report facts. `Verifier` holds
what checks share (the worker pool, the GPU lock, the parameter seed); `_Check` holds the state
of one check, so `verify` can run in several threads at once.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Callable

from ..problem import Problem
from . import verdict as V
from .gpus import lock_id
from .pool import GpuLock, PoolSettings, WorkerDied, WorkerPool
from .static import check_source
from .verdict import GraphTimings, Timing, Timings, Trial, Verdict, launched_kernel, same_launches

NO_CUDA = "not measured (no CUDA device)"
INPUT_SETS_BUDGET_BYTES = 12 << 30
# A problem whose inputs and outputs take this much is checked with the GPU's memory to itself:
# the reference and the candidate each hold a copy, and other checks would not fit beside it.
ALONE_BYTES = 2 << 30
QUICK_TIMING_TRIALS = 30
COMPILE_S_PER_CONFIG = 3.0  # Triton compiles a kernel configuration in about a second on an H100 host
IMPLAUSIBLE_SPEEDUP = 10.0
KERNELS_REPORTED = 12  # the heaviest kernels of a timed call, in the verdict
# PyTorch's GPU kernels that only allocate, fill or copy (what strict mode allows besides Triton)
LAYOUT_KERNEL = re.compile(r"Memcpy|Memset|FillFunctor|fill_kernel|direct_copy_kernel|elementwise_kernel_with_index")


@dataclass
class VerifyConfig:
    device: str = "auto"  # auto | cpu | cuda
    mode: str = "strict"  # strict: Triton only in forward; mixed: PyTorch ops allowed, reported
    trials: int = 5
    after_timing_trials: int = 2  # re-checks with new inputs, in the buffers of earlier calls
    timeout_s: float = 120.0  # per step (load, one trial)
    compile_timeout_s: float = 900.0  # building the reference and torch.compile, once a problem
    # loading a candidate, which compiles its kernels ahead (None: compile_timeout_s; RL rewards
    # allow less: one rollout's slow compile holds its whole step)
    load_timeout_s: float | None = None
    timing_trials: int = 100
    # tune autotuned kernels again, with the GPU held alone, before timing (their trials tuned them
    # beside other checks). RL rewards turn it off: re-tuning every rollout's kernels alone made
    # steps wait, and a reward may time the trials' choice (it can only understate the speed)
    retune_before_timing: bool = True
    timing_warmup: int = 3
    input_sets: int = 3  # rotated while timing
    workers: int = 2
    memory_limit_mb: int | None = 16384
    # None: each module in the mode its constructor left it, as KernelBench runs them (training
    # mode unless __init__ calls eval()); True / False: every module in that mode
    training: bool | None = None
    isolate_network: bool = True
    gpus: str | None = None  # which GPUs the workers use (CUDA_VISIBLE_DEVICES), e.g. not training's
    # threads each candidate worker compiles Triton kernels with (drtriton.verify.worker.
    # parallel_compile); None: the host's cores shared among `host_workers` (default this
    # verifier's workers), at most 8. Oversubscribed hosts compiled slower: two GPUs' twelve
    # workers asked 96 threads of 32 cores, and their compile-ahead phase took twice as long
    compile_threads: int | None = None
    host_workers: int | None = None  # candidate workers on this host, all verifiers together
    # also time forward replayed as a CUDA graph (drtriton.cuda_graph), beside
    # torch.compile(mode="reduce-overhead"): Verdict.graph (GPU, full checks only)
    cuda_graph: bool = False

    def __post_init__(self):
        if self.mode not in ("strict", "mixed"):
            raise ValueError(f"mode must be strict or mixed, not {self.mode!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, not {self.device!r}")
        if self.load_timeout_s is not None and self.load_timeout_s <= 0:
            raise ValueError("load_timeout_s must be positive, or None for compile_timeout_s")
        for name in ("compile_threads", "host_workers"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, or None for the default")
        if self.trials < 5:
            raise ValueError("at least 5 correctness trials")
        if self.timing_trials < 1:
            raise ValueError("at least 1 timing trial")


def compile_threads_for(workers: int, cores: int | None = None) -> int:
    """Each candidate worker's share of the host's cores for compiling kernels: 1 to 8."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores // max(1, workers)))


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda: no CUDA device is visible")
    return device


class _Fault(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class _OutOfMemory(Exception):
    """CUDA ran out of memory; maybe because other checks hold it (retried alone)."""


class _ReferenceLost(Exception):
    """The reference outputs of a trial are gone (the reference worker was replaced after another
    problem broke its CUDA context, or evicted them to free memory): the trial is run again."""


class _NeedsGpuAlone(Exception):
    """The problem turned out too large to share the GPU's memory: start the check again alone."""


class _WarmUp:
    """A torch.compile warm-up (Verifier.warm_compile): whoever claims it first compiles: the
    warm-up once it holds its locks, or the problem's first timed check, which then finds
    it called off. A check that loses the claim waits for `done`."""

    def __init__(self):
        self.done = threading.Event()
        self.outcome = "pending"  # compiled | called off | skipped | failed, with why
        self._lock = threading.Lock()
        self._claimed = False

    def claim(self) -> bool:
        with self._lock:
            first, self._claimed = not self._claimed, True
            return first


class Verifier:
    """Reusable: keep one per process (the editor, a search, an RL reward pool) and call
    `verify` from as many threads as there are workers."""

    def __init__(self, config: VerifyConfig | None = None):
        self.config = config or VerifyConfig()
        self.device = resolve_device(self.config.device)
        self.pool = WorkerPool(
            PoolSettings(self.device, self.config.memory_limit_mb, self.config.isolate_network, gpus=self.config.gpus,
                         compile_threads=self.config.compile_threads or compile_threads_for(
                             self.config.host_workers or self.config.workers)),
            size=self.config.workers,
        )
        # timing holds the GPU alone, large problems its memory: locks of this GPU (a verifier on
        # another GPU of the node takes its own)
        gpu = lock_id(self.config.gpus) if self.device == "cuda" else "cpu"
        self.gpu = GpuLock(self.pool.settings.cache_dir, f"gpu-{gpu}.lock")
        self.memory = GpuLock(self.pool.settings.cache_dir, f"memory-{gpu}.lock")
        self._alone: set[str] = set()  # keys of problems checked with the GPU's memory alone
        self.init_seed = secrets.randbits(31)  # parameters; secret like the input seeds
        self.background = ThreadPoolExecutor(max_workers=self.config.workers, thread_name_prefix="drtriton-ref")
        self._warmups: dict[str, _WarmUp] = {}  # problem key -> its torch.compile warm-up
        self._warmers = ThreadPoolExecutor(max_workers=self.config.workers, thread_name_prefix="drtriton-warm")

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def capacity(self) -> int:
        """How many checks may run at once (one per candidate worker)."""
        return self.config.workers

    def _memory(self, alone: bool):
        """Checks share the GPU's memory; a large problem's check (or one that ran out of memory
        beside others) holds it alone. Nothing to share on a CPU."""
        if not self.cuda:
            return contextlib.nullcontext()
        return self.memory.exclusive() if alone else self.memory.shared()

    def close(self) -> None:
        self.background.shutdown(wait=False, cancel_futures=True)
        self._warmers.shutdown(wait=False, cancel_futures=True)
        self.pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def verify(
        self,
        problem: Problem,
        source: str,
        candidate_class: str | None = None,
        cancel: threading.Event | None = None,
        progress: Callable[[str], None] | None = None,
        quick: bool = False,
        mode: str | None = None,
        other_shapes: bool | None = None,
        cuda_graph: bool | None = None,
    ) -> Verdict:
        """Check `source` against `problem`. Setting `cancel` stops the check (raising
        `Cancelled`); `progress` receives a short line at each step. `quick` (the search's
        fragment checks): the same correctness checks on get_inputs()'s shapes, timing against
        eager only, fewer calls. `other_shapes`: also check a second input configuration (another
        batch size: a trial of phase "other_shapes"); by default in full checks, not quick ones.
        `mode` overrides the configured strict/mixed mode for this check, `cuda_graph` the
        configured CUDA-graph option (full checks on a GPU only)."""
        if mode not in (None, "strict", "mixed"):
            raise ValueError(f"mode must be strict or mixed, not {mode!r}")
        started = time.monotonic()
        progress = progress or (lambda _msg: None)
        while True:
            alone = problem.key in self._alone
            check = _Check(self, problem, cancel, progress, quick, mode or self.config.mode, alone=alone,
                           other_shapes=not quick if other_shapes is None else other_shapes,
                           cuda_graph=self.config.cuda_graph if cuda_graph is None else cuda_graph)
            try:
                with self._memory(alone):
                    check.run(source, candidate_class)
            except (_OutOfMemory, _NeedsGpuAlone) as e:
                if not alone and self.cuda:
                    self._alone.add(problem.key)
                    progress("checking again with the GPU's memory to itself")
                    continue
                check.verdict.status, check.verdict.correct = V.FAILED, False
                check.verdict.reasons.insert(0, f"out of memory{' with the GPU to itself' if alone else ''}: {e}")
            except _Fault as f:
                check.verdict.status, check.verdict.correct = f.status, False
                check.verdict.reasons.insert(0, f.reason)
            except WorkerDied as e:
                check.verdict.status, check.verdict.correct = V.FAILED, False
                check.verdict.reasons.insert(0, f"the worker running it {e}")
            break
        check.verdict.elapsed_s = round(time.monotonic() - started, 3)
        return check.verdict

    def capture(self, problem: Problem, cancel: threading.Event | None = None):
        """The problem's module as a graph over the vocabulary (`drtriton.capture.Graph`).
        Tracing runs the user's code, so it happens in the reference worker. Raises
        `CaptureError` (untraceable) or `ProblemError` (the problem cannot be built)."""
        from ..capture import CaptureError, Graph
        from ..problem import ProblemError

        def run(alone: bool) -> dict:
            check = _Check(self, problem, cancel, lambda _m: None, alone=alone)
            with self._memory(alone):
                prep = check.prepare()
                with self.pool.reference() as ref:
                    reply = ref.call({"op": "capture", "problem": problem.to_dict(), "init_seed": self.init_seed,
                                      "training": prep["training"], "seed": secrets.randbits(62)},
                                     self.config.compile_timeout_s, cancel)
            if reply.get("kind") == "oom":
                raise _OutOfMemory(reply["error"])
            return reply

        try:
            try:
                reply = run(problem.key in self._alone)
            except _OutOfMemory:  # once more, with the GPU's memory to itself
                if problem.key in self._alone or not self.cuda:
                    raise
                self._alone.add(problem.key)
                reply = run(True)
        except _Fault as f:
            raise ProblemError(f.reason) from None
        except _OutOfMemory as e:
            raise ProblemError(f"out of memory: {e}") from None
        except WorkerDied as e:  # the problem's own code crashed or hung the reference worker
            raise ProblemError(f"running the module {e}") from None
        if reply.get("kind") == "problem":
            raise ProblemError(reply["error"])
        if not reply.get("ok"):
            raise CaptureError(reply.get("error", "capture failed"))
        return Graph.from_dict(reply["graph"])

    def warm_compile(self, problem: Problem) -> None:
        """Start compiling `problem`'s module with torch.compile now, in a worker of its own,
        once per problem (CUDA only: nothing is timed elsewhere). The first full check's timing
        then finds Inductor's caches warm: for a whole network that is tens of seconds off the
        path to the first verdict, spent while the search captures and checks its first plan."""
        if not self.cuda or problem.key in self._warmups:
            return
        warm = self._warmups[problem.key] = _WarmUp()
        self._warmers.submit(self._warm_compile, problem, warm)

    def _warm_compile(self, problem: Problem, warm: "_WarmUp") -> None:
        try:
            with self.pool.spare("compile") as worker:  # starts while the reference is prepared
                prep = _Check(self, problem, None, lambda _m: None).prepare()  # the checks' training flag
                if problem.key in self._alone or prep["input_bytes"] + prep["output_bytes"] >= ALONE_BYTES:
                    warm.outcome = "skipped: a large problem holds the GPU's memory alone"
                    return
                with self._memory(False), self.gpu.shared():
                    if not warm.claim():
                        return  # a check began compiling first
                    reply = worker.call({"op": "warm_compile", "problem": problem.to_dict(),
                                         "init_seed": self.init_seed, "training": prep["training"],
                                         "seed": secrets.randbits(62)}, self.config.compile_timeout_s)
                    warm.outcome = "compiled" if reply.get("ok") else f"failed: {reply.get('error')}"
        except Exception as e:  # only a warm-up: the timed check compiles and reports for itself
            warm.outcome = f"failed: {type(e).__name__}: {e}"
        finally:
            warm.done.set()

    def wait_warm_compile(self, key: str, cancel: threading.Event | None = None) -> None:
        """Before a check compiles the reference itself: wait for a warm-up of this problem
        that is compiling (beside it, the same work would be done twice), or call off one that
        has not begun (it may be queued on a lock this check holds). A cancelled check stops
        waiting."""
        warm = self._warmups.get(key)
        if warm is None:
            return
        if warm.claim():
            warm.outcome = "called off: a check compiles first"
            warm.done.set()  # later checks need not wait for it
            return
        deadline = time.monotonic() + self.config.compile_timeout_s
        while not warm.done.wait(0.2):
            if (cancel is not None and cancel.is_set()) or time.monotonic() > deadline:
                return

    def settings(self) -> dict:
        c = self.config
        return {
            "mode": c.mode, "trials": c.trials, "after_timing_trials": c.after_timing_trials,
            "timing_trials": c.timing_trials, "input_sets": c.input_sets, "training": c.training,
            "timeout_s": c.timeout_s, "tf32": False,
            "tolerance_fp32": asdict(V.Tolerance.for_dtype("torch.float32")),
        }


@dataclass
class _Check:
    verifier: Verifier
    problem: Problem
    cancel: threading.Event | None
    progress: Callable[[str], None]
    quick: bool = False
    mode: str = "strict"
    alone: bool = False  # holds the GPU's memory alone (a large problem)
    other_shapes: bool = False  # also check a second input configuration (another batch size)
    cuda_graph: bool = False  # also time the verified module replayed as a CUDA graph
    verdict: Verdict = field(init=False)
    other_sizes: str = field(default="", init=False)  # "a leading dimension of 32 instead of 64"
    launches: list | None = None  # the launch sequence of the first verified call
    reference_shapes: list | None = None  # the reference's output shapes on the first trial
    sizes_follow_data: bool = False  # forward makes sizes from values (x[mask]): launches compared by kernel
    candidate_outputs: list = field(default_factory=list)  # fingerprints, per trial
    compile_allowance_s: float = 0.0  # added to the step limit of calls that compile (see run)
    reference_outputs: list = field(default_factory=list)

    def __post_init__(self):
        self._phase_start = time.monotonic()
        self.config = self.verifier.config
        self.pool = self.verifier.pool
        self.cuda = self.verifier.cuda
        self.verdict = Verdict(correct=False, status=V.FAILED, device=self.verifier.device,
                               settings={**self.verifier.settings(), "mode": self.mode, "quick": self.quick})
        if self.alone:
            self.verdict.settings["gpu_memory"] = "alone"

    def phase_done(self, name: str) -> None:
        now = time.monotonic()
        self.verdict.phases_s[name] = round(self.verdict.phases_s.get(name, 0.0) + now - self._phase_start, 3)
        self._phase_start = now

    # -- the steps -------------------------------------------------------------------------------
    def run(self, source: str, candidate_class: str | None) -> None:
        v, problem = self.verdict, self.problem
        accepted = [candidate_class] if candidate_class else [problem.candidate_class, "ModelNew"]
        report = check_source(source, list(dict.fromkeys(accepted)), problem.class_name, problem.source)
        if not report.ok:
            status = V.FAILED if report.errors[0].message.startswith("syntax error") else V.REJECTED
            v.reasons += [str(f) for f in report.errors]
            raise _Fault(status, v.reasons.pop(0))

        self.phase_done("static")
        self.progress("building the reference")
        prep = self.prepare()
        if self.cuda and not self.alone and prep["input_bytes"] + prep["output_bytes"] >= ALONE_BYTES:
            raise _NeedsGpuAlone(f"{(prep['input_bytes'] + prep['output_bytes']) / 2**30:.1f} GiB of inputs and outputs")
        self.phase_done("reference")
        v.flags += prep["flags"]
        v.settings["training"] = prep["training"]
        if "input_shapes" in prep:
            v.shapes_checked = [prep["input_shapes"]]
        dtypes = {o["dtype"] for o in prep["outputs"]} | set(prep["input_dtypes"])
        if "torch.float32" in dtypes:
            # a 16-bit dtype the reference itself returns or takes is needed to match it (a module
            # ending in `.half()`); any other lowering is speed bought with accuracy
            lowered = [f for f in report.reduced_precision if f.dtype not in dtypes]
            if lowered:
                raise _Fault(V.REJECTED, "reduced precision in an fp32 problem: " + "; ".join(map(str, lowered)))

        self.progress("loading the candidate")
        with self.pool.candidate() as worker:
            self.worker = worker
            v.settings["isolation"] = worker.hello.get("isolation")
            v.device = worker.hello.get("device_name", self.verifier.device)
            loaded = self.candidate_call({
                "op": "load", "key": problem.key, "problem": problem.to_dict(), "source": source,
                "class_name": report.candidate_class, "init_seed": self.verifier.init_seed,
                "training": prep["training"], "state_fingerprint": prep["state_fingerprint"],
                "mode": self.mode, "kernels": report.kernels,
            }, timeout=self.config.load_timeout_s or self.config.compile_timeout_s)
            v.settings["parameters"] = loaded["parameters"]
            if loaded.get("compiled_ahead") is not None:  # kernels compiled before the first call
                v.settings["compiled_ahead"] = loaded["compiled_ahead"] or "every kernel"
            self.phase_done("load")
            # The first call (and the first at other shapes) compiles and tunes every kernel
            # configuration: a whole network's dozens take minutes, which is not a hang
            configs = max(len(report.kernels), source.count("triton.Config("))
            self.compile_allowance_s = min(COMPILE_S_PER_CONFIG * configs, self.config.compile_timeout_s)
            for i in range(self.config.trials):
                self.trial(i, "initial", extra_calls=i % 2)  # vary the number of calls
                self.progress(f"trial {i + 1}/{self.config.trials} passed")
            if self.other_shapes:  # before timing: a candidate wrong there is not worth timing
                self.trial(len(v.trials), "other_shapes", extra_calls=0)
            self.phase_done("trials")
            if self.cuda:
                self.progress("timing against eager and torch.compile")
                self.time(prep)
            else:
                v.speed_note = NO_CUDA
            for i in range(self.config.after_timing_trials):
                self.trial(len(v.trials), "after_timing", extra_calls=0)
            self.phase_done("trials")
            self.candidate_call({"op": "trim"})
            if self.cuda and self.cuda_graph and not self.quick:
                self.progress("timing forward replayed as a CUDA graph")
                self.time_graph()
        with self.pool.reference() as ref:
            ref.call({"op": "trim"}, self.config.timeout_s, self.cancel)
        if len(set(self.reference_outputs)) == 1:
            v.flags.append("the reference output is the same for every input: correctness is vacuous")
        elif len(set(self.candidate_outputs)) == 1:
            raise _Fault(V.REJECTED, "the output does not change when the input changes")
        v.correct, v.status = True, V.CORRECT

    def prepare(self) -> dict:
        """The reference worker builds the problem once per key and keeps a few."""
        problem = self.problem
        with self.pool.reference() as ref:
            if problem.key not in self.pool.prepared:
                reply = ref.call({
                    "op": "prepare", "key": problem.key, "problem": problem.to_dict(),
                    "device": self.verifier.device, "init_seed": self.verifier.init_seed,
                    "training": self.config.training, "probe_seed": secrets.randbits(62),
                }, self.config.compile_timeout_s, self.cancel)
                if reply.get("kind") == "oom":
                    raise _OutOfMemory(reply["error"])
                if not reply.get("ok"):
                    raise _Fault(V.ERROR, f"the problem cannot be checked: {reply.get('error')}")
                self.pool.prepared[problem.key] = reply
            return self.pool.prepared[problem.key]

    def reference_call(self, request: dict, timeout: float | None = None) -> dict:
        for _ in range(4):  # again if the reference worker evicted the problem meanwhile (busy benches)
            self.prepare()
            with self.pool.reference() as ref:
                reply = ref.call(request, timeout or self.config.timeout_s, self.cancel)
            if reply.get("kind") != "unprepared":
                break
            self.pool.prepared.pop(self.problem.key, None)
        if reply.get("kind") == "oom":
            raise _OutOfMemory(reply["error"])
        if reply.get("kind") == "lost":
            raise _ReferenceLost(reply["error"])
        if not reply.get("ok"):
            raise _Fault(V.ERROR, f"the problem cannot be checked: {reply.get('error')}")
        return reply

    def candidate_call(self, request: dict, timeout: float | None = None) -> dict:
        worker = self.worker
        reply = worker.call(request, timeout or self.config.timeout_s, self.cancel)
        tainted = reply.get("tainted") or []
        if tainted:
            worker.kill("tainted: " + "; ".join(tainted))
        if not reply.get("ok"):
            kind = reply.get("kind")
            if kind == "problem":
                raise _Fault(V.ERROR, f"the problem cannot be checked: {reply['error']}")
            if kind == "oom":
                raise _OutOfMemory(reply["error"])
            if kind == "internal":
                worker.kill("internal error")
                where = (reply.get("traceback") or "").strip().splitlines()[-3:-1]
                raise _Fault(V.FAILED, f"verifier error while checking it: {reply['error']}"
                             + (f" ({' / '.join(w.strip() for w in where)})" if where else ""))
            raise _Fault(V.REJECTED if kind == "rejected" else V.FAILED, reply["error"])
        if tainted:
            raise _Fault(V.REJECTED, "; ".join(tainted))
        return reply

    def trial(self, index: int, phase: str, extra_calls: int) -> None:
        """One trial; run again (new inputs) if its reference outputs were lost meanwhile."""
        try:
            return self._trial(index, phase, extra_calls)
        except _ReferenceLost:
            with contextlib.suppress(Exception):
                self.candidate_call({"op": "release"})
            self.progress("the reference outputs were lost (its worker restarted): the trial runs again")
        try:
            return self._trial(index, phase, extra_calls)
        except _ReferenceLost as e:
            raise _Fault(V.ERROR, f"the problem cannot be checked: {e}") from None

    def _trial(self, index: int, phase: str, extra_calls: int) -> None:
        """One trial; phase "other_shapes": on the second input configuration (another leading
        dimension, drawn in both workers by `make_other_inputs`), where the reference runs first
        and a reference that cannot take it means no such trial (a flag, no failure)."""
        v, key = self.verdict, self.problem.key
        seed = secrets.randbits(62)
        other = phase == "other_shapes"
        with self.verifier.gpu.shared() if self.cuda else contextlib.nullcontext():
            if other:
                r = self.reference_call({"op": "reference", "key": key, "seed": seed, "other_shapes": True})
                if r.get("skipped"):
                    v.flags.append(f"no second input configuration checked: {r['skipped']}")
                    return
                n, m = r["sizes"]
                self.other_sizes = f"a leading dimension of {m} instead of {n}"
                v.shapes_checked.append(r["shapes"])
                self.progress(f"checking inputs with {self.other_sizes}")
                reference = Future()
                reference.set_result(r)
            else:
                # The two workers compute at the same time; neither sees the other's tensors.
                reference = self.verifier.background.submit(
                    self.reference_call, {"op": "reference", "key": key, "seed": seed})
            try:
                compiles = self.launches is None or other
                c = self.candidate_call({"op": "run", "seed": seed, "extra_calls": extra_calls,
                                         "reuse_buffers": phase == "after_timing", "other_shapes": other},
                                        timeout=self.config.timeout_s + (self.compile_allowance_s if compiles else 0.0))
            except BaseException as e:
                with contextlib.suppress(Exception):
                    reference.result()
                    with self.pool.reference() as ref:
                        ref.call({"op": "release", "key": key, "seed": seed}, self.config.timeout_s)
                failing = f"fails for inputs with {self.other_sizes} (other input shapes)"
                if other and isinstance(e, _Fault) and e.status != V.ERROR:
                    raise _Fault(e.status, f"{failing}: {e.reason}") from None
                if other and isinstance(e, WorkerDied):
                    raise _Fault(V.FAILED, f"{failing}: the worker running it {e}") from None
                raise
            r = reference.result()
            if c["input_fingerprint"] != r["input_fingerprint"]:
                raise _Fault(V.ERROR, f"{self.problem.inputs_fn}() gives different inputs for the "
                                      "same seed: make it draw only from torch's random generator")
            cmp = self.reference_call({"op": "compare", "key": key, "seed": seed, "files": c["files"],
                                       "other_shapes": other})
            self.candidate_call({"op": "release"})
        if not other:  # the problem's own answer (a forward on fake tensors), or outputs that changed shape
            follows = bool(r.get("sizes_follow_data")) or (
                self.reference_shapes is not None and r.get("output_shapes") != self.reference_shapes)
            if self.reference_shapes is None:
                self.reference_shapes = r.get("output_shapes")
            if follows and not self.sizes_follow_data:
                self.sizes_follow_data = True
                v.flags.append("forward's sizes follow the input values: launches compared by kernel and order")
        if other:  # other grids, maybe other kernels: no launch sequence to compare
            v.triton_kernels = sorted(set(v.triton_kernels) | {launched_kernel(name) for name in c["launches"]})
        elif self.launches is None:
            self.launches = c["launches"]
            v.triton_kernels = sorted({launched_kernel(name) for name in c["launches"]})
        elif not same_launches(c["launches"], self.launches, self.sizes_follow_data):
            raise _Fault(V.REJECTED, f"launches changed between calls ({c['launches']} after "
                                     f"{self.launches}): behaviour depends on the call count or on inputs seen before")
        for op, n in c["pytorch_ops"].items():
            v.pytorch_ops[op] = max(v.pytorch_ops.get(op, 0), n)
        if not other:
            self.candidate_outputs.append(c["output_fingerprint"])
            self.reference_outputs.append(r["output_fingerprint"])
        trial = Trial(index=index, phase=phase, passed=cmp["passed"],
                      **{k: cmp.get(k) for k in ("max_abs_error", "max_rel_error", "rel_error_norm")},
                      mismatched=cmp.get("mismatched", 0), total=cmp.get("total", 0),
                      note=cmp.get("note", ""))
        v.trials.append(trial)
        if not trial.passed and other:
            raise _Fault(V.INCORRECT, f"wrong for inputs with {self.other_sizes} (other input shapes): "
                                      f"{trial.note or 'mismatch'}")
        if not trial.passed:
            when = (f"on trial {index + 1}" if phase == "initial"
                    else f"on re-check {index + 1} (new inputs in the buffers of earlier calls)")
            raise _Fault(V.INCORRECT, f"wrong output {when}: {trial.note or 'mismatch'}")

    def time(self, prep: dict) -> None:
        c, v = self.config, self.verdict
        if not self.quick:
            self.verifier.wait_warm_compile(self.problem.key, self.cancel)
        with self.verifier.gpu.shared():
            self.candidate_call({"op": "prepare_timing", "seed": secrets.randbits(62), "compile": not self.quick},
                                timeout=c.compile_timeout_s)
        self.phase_done("torch.compile")
        floor_bytes = prep["input_bytes"] + prep["output_bytes"]
        t, timings = self.measure(floor_bytes, prep["input_bytes"])
        if _implausible(timings):
            t, timings = self.measure(floor_bytes, prep["input_bytes"])
            if _implausible(timings):
                v.flags.append("implausible speed (over 10x eager or under the memory-bandwidth "
                               "floor), confirmed by a second measurement")
        cand = timings.candidate
        if cand.wall_median_ms and cand.wall_median_ms > 1.5 * cand.median_ms + 0.1:
            v.flags.append(f"host clock ({cand.wall_median_ms:.3f} ms) far above the events "
                           f"({cand.median_ms:.3f} ms): work outside the timed stream?")
        v.timings = timings
        v.triton_share = t["triton_share"]
        heaviest = sorted(t["kernel_ms"].items(), key=lambda kv: -kv[1])[:KERNELS_REPORTED]
        v.kernel_ms = {name[:120]: round(ms, 4) for name, ms in heaviest}
        v.kernels_total_ms = round(sum(t["kernel_ms"].values()), 4)
        v.speedup_eager = timings.eager.median_ms / cand.median_ms
        if timings.compiled:
            v.speedup_compile = timings.compiled.median_ms / cand.median_ms
        self.phase_done("timing")
        foreign = sorted(k for k in t["kernel_ms"] if k not in v.triton_kernels)
        if foreign and self.mode == "strict":
            # The dispatcher saw no PyTorch compute in the trials, yet the GPU ran some: it was
            # hidden from the dispatcher (a disabled dispatch mode, native code)
            computed = [k for k in foreign if not LAYOUT_KERNEL.search(k)]
            if computed:
                raise _Fault(V.REJECTED, "PyTorch computes in forward out of the verifier's sight (strict mode "
                                         "allows only allocation, views and copies): GPU kernels "
                                         + ", ".join(k[:80] for k in computed[:3]))
            v.flags.append("non-Triton kernels on the GPU: " + ", ".join(foreign[:5]))

    def measure(self, floor_bytes: int, input_bytes: int) -> tuple[dict, Timings]:
        c = self.config
        # The references rotate through several input sets (the candidate gets new ones every
        # call), but no more than fit a budget: KernelBench inputs reach 16 GB (those are far
        # larger than any cache, so one set loses nothing).
        sets = max(1, min(c.input_sets, INPUT_SETS_BUDGET_BYTES // max(input_bytes, 1)))
        request = {"op": "time", "seeds": [secrets.randbits(62) for _ in range(sets)],
                   "trials": min(c.timing_trials, QUICK_TIMING_TRIALS) if self.quick else c.timing_trials,
                   "warmup": c.timing_warmup, "launches": self.launches, "sizes_follow_data": self.sizes_follow_data,
                   "compile": not self.quick,
                   "retune": c.retune_before_timing,
                   # three sets at once (the references', the candidate's last and new ones) do
                   # not fit: the candidate's calls repeat nothing
                   "lean": 3 * input_bytes > INPUT_SETS_BUDGET_BYTES}
        with self.verifier.gpu.exclusive():
            t = self.candidate_call(request, timeout=c.timeout_s + 60.0)
        self.check_timed_outputs(t["checks"], request["trials"])
        if t.get("retimed"):
            self.verdict.flags.append("timed twice: in the first round, calls on repeated inputs ran much faster "
                                      "than on new ones (a busy host?); the second round's timings are reported")
        if t.get("launches") is not None:  # the re-checks and the graph launch what timed calls did
            # (the same as the verified calls, except configurations autotuners chose again)
            self.launches = t["launches"]
        raw = t["timings"]
        timings = Timings(
            candidate=Timing(**raw["candidate"]), eager=Timing(**raw["eager"]),
            compiled=Timing(**raw["compiled"]) if "compiled" in raw else None,
            compile_note=t.get("compile_note", ""),
            memory_floor_ms=floor_bytes / t["bandwidth_bytes_per_ms"],
            replayed=Timing.from_samples(t["replay_ms"]) if t["replay_ms"] else None,
            outputs_checked=len(t["checks"]),
        )
        return t, timings

    def time_graph(self) -> None:
        """The CUDA-graph option, after the verified module's checks: a note instead of timings
        where forward cannot be captured, its replays disagree with the reference or the step
        itself fails (an option never changes the verdict, except a rejection: a patched
        function or a sandbox refusal while captured or replayed)."""
        c, v = self.config, self.verdict
        try:
            with self.verifier.gpu.shared():  # torch.compile(mode="reduce-overhead"): minutes, shared
                self.candidate_call({"op": "prepare_graph", "seed": secrets.randbits(62)},
                                    timeout=c.compile_timeout_s)
            request = {"op": "time_graph", "seed": secrets.randbits(62), "trials": c.timing_trials,
                       "warmup": c.timing_warmup, "launches": self.launches,
                       "sizes_follow_data": self.sizes_follow_data, "compile": True}
            with self.verifier.gpu.exclusive():
                t = self.candidate_call(request, timeout=c.timeout_s + 60.0)
            v.graph = self._graph_timings(t)
        except _Fault as f:
            if f.status == V.REJECTED:
                raise
            v.graph = GraphTimings(note=f"the CUDA-graph step failed: {f.reason}")
        except (WorkerDied, _OutOfMemory, _ReferenceLost) as e:
            v.graph = GraphTimings(note=f"the CUDA-graph step failed: {e}")
        finally:
            # graph captures (ours, torch.compile's) can leave the CUDA generator in capture
            # mode ("offset increment outside graph capture"): no later check runs in this worker
            self.worker.kill("captured CUDA graphs")
        self.phase_done("cuda graph")

    def _graph_timings(self, t: dict) -> GraphTimings:
        if "timings" not in t:
            return GraphTimings(note=t["note"])
        if not t["checks"]:  # each replay is picked by chance: rarely none
            self.candidate_call({"op": "release"})
            return GraphTimings(note="no replay was picked for checking: not reported")
        wrong, compared = self.timed_mismatch(t["checks"])
        if wrong:
            return GraphTimings(note=f"replay {wrong['call'] + 1} disagreed with the reference "
                                     f"({wrong.get('note') or 'mismatch'}): forward depends on values read "
                                     "on the host, which a graph does not read again")
        if not compared:
            return GraphTimings(note="no replay could be compared with the reference: not reported")
        raw = t["timings"]
        return GraphTimings(**{k: Timing(**raw[name]) for k, name in
                               (("candidate", "graph"), ("eager", "eager"), ("compiled", "compiled"))
                               if name in raw}, note=t["note"])

    def timed_mismatch(self, checks: list[dict]) -> tuple[dict | None, int]:
        """The first timed output the worker kept that disagrees with the reference on the same
        inputs (its call and note), or None; and how many were compared."""
        try:
            with self.verifier.gpu.shared():
                reply = self.reference_call({"op": "check_timed", "key": self.problem.key, "calls": checks},
                                            timeout=self.config.timeout_s * max(1.0, len(checks) / 4))
        finally:
            self.candidate_call({"op": "release"})
        if reply.get("unchecked"):
            self.verdict.flags.append(f"{reply['unchecked']} of {len(checks)} picked timed outputs not compared "
                                      "(the reference ran out of memory)")
        return next((r for r in reply["results"] if not r["passed"]), None), len(reply["results"])

    def check_timed_outputs(self, checks: list[dict], calls: int) -> None:
        """Compare the timed calls the worker picked at random with the reference on the same
        inputs: a candidate that computes something else while it is timed (it noticed, or
        returns what it remembered) is rejected."""
        if not checks:  # none picked this run (each call is picked by chance): nothing shared
            return
        wrong, _ = self.timed_mismatch(checks)
        if wrong:
            raise _Fault(V.REJECTED, f"the timed calls disagreed with the verified ones (timed call {wrong['call'] + 1} "
                                     f"of {calls}: {wrong.get('note') or 'mismatch'}): behaviour depends on being "
                                     "timed, on the call count or on inputs seen before")


def _implausible(t: Timings) -> bool:
    cand = t.candidate.median_ms
    return t.eager.median_ms / cand > IMPLAUSIBLE_SPEEDUP or (
        t.memory_floor_ms is not None and cand < t.memory_floor_ms
    )
