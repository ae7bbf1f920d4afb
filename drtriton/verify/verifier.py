"""The verifier: one candidate source against one problem, to a `Verdict`.

    static checks  ->  reference prepared (reference worker)
                   ->  candidate loaded (candidate worker)
                   ->  trials: inputs from secret seeds, run, compare in the reference worker
                   ->  timing on CUDA (exclusive GPU), re-checked with new inputs afterwards
                   ->  Verdict

Only this module decides what counts as correct; the workers report facts.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from dataclasses import asdict, dataclass

from ..problem import Problem
from . import verdict as V
from .pool import Cancelled, GpuLock, PoolSettings, WorkerDied, WorkerPool
from .static import check_source
from .verdict import Timing, Timings, Trial, Verdict

NO_CUDA = "not measured (no CUDA device)"
IMPLAUSIBLE_SPEEDUP = 10.0


@dataclass
class VerifyConfig:
    device: str = "auto"  # auto | cpu | cuda
    mode: str = "strict"  # strict: Triton only in forward; mixed: PyTorch ops allowed, reported
    trials: int = 5
    after_timing_trials: int = 2
    timeout_s: float = 120.0  # per step (load, one trial)
    compile_timeout_s: float = 900.0  # torch.compile of the reference, once per problem
    timing_trials: int = 100
    timing_warmup: int = 3
    input_sets: int = 3  # rotated while timing
    workers: int = 2
    memory_limit_mb: int | None = 16384
    training: bool = True  # KernelBench checks modules in training mode
    isolate_network: bool = True

    def __post_init__(self):
        if self.mode not in ("strict", "mixed"):
            raise ValueError(f"mode must be strict or mixed, not {self.mode!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, not {self.device!r}")
        if self.trials < 5:
            raise ValueError("at least 5 correctness trials")


def resolve_device(device: str) -> str:
    if device != "auto":
        if device == "cuda" and not _cuda_available():
            raise ValueError("--device cuda: no CUDA device is visible")
        return device
    return "cuda" if _cuda_available() else "cpu"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


class _Fault(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class Verifier:
    """Reusable: keep one per process (the editor, a search, an RL reward pool) and call
    `verify` from as many threads as there are workers."""

    def __init__(self, config: VerifyConfig | None = None):
        self.config = config or VerifyConfig()
        self.device = resolve_device(self.config.device)
        self.pool = WorkerPool(
            PoolSettings(self.device, self.config.memory_limit_mb, self.config.isolate_network),
            size=self.config.workers,
        )
        self.gpu = GpuLock(self.pool.settings.cache_dir)
        self._init_seed = secrets.randbits(31)  # parameters; secret like the input seeds

    def close(self) -> None:
        self.pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------------------------------
    def verify(
        self,
        problem: Problem,
        source: str,
        candidate_class: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Verdict:
        started = time.monotonic()
        v = Verdict(correct=False, status=V.FAILED, device=self.device, settings=self._settings())
        try:
            self._verify(problem, source, candidate_class, cancel, v)
        except _Fault as f:
            v.status, v.correct = f.status, False
            v.reasons.insert(0, f.reason)
        except WorkerDied as e:
            v.status, v.correct = V.FAILED, False
            v.reasons.insert(0, f"the worker running it {e}")
        v.elapsed_s = round(time.monotonic() - started, 3)
        return v

    def _settings(self) -> dict:
        c = self.config
        return {
            "mode": c.mode, "trials": c.trials, "after_timing_trials": c.after_timing_trials,
            "timing_trials": c.timing_trials, "input_sets": c.input_sets, "training": c.training,
            "timeout_s": c.timeout_s, "tf32": False,
            "tolerance_fp32": asdict(V.Tolerance.for_dtype("torch.float32")),
        }

    def _verify(self, problem, source, candidate_class, cancel, v: Verdict) -> None:
        accepted = [candidate_class] if candidate_class else [problem.candidate_class, "ModelNew"]
        report = check_source(source, list(dict.fromkeys(accepted)), problem.class_name)
        if not report.ok:
            status = V.FAILED if report.errors[0].message.startswith("syntax error") else V.REJECTED
            v.reasons += [str(f) for f in report.errors]
            raise _Fault(status, v.reasons.pop(0))

        prep = self._prepare(problem, cancel)
        v.flags += prep["flags"]
        v.settings["training"] = prep["training"]
        if "torch.float32" in {o["dtype"] for o in prep["outputs"]} | set(prep["input_dtypes"]):
            if report.reduced_precision:
                raise _Fault(V.REJECTED, "reduced precision in an fp32 problem: "
                             + "; ".join(str(f) for f in report.reduced_precision))

        with self.pool.candidate() as worker:
            v.settings["isolation"] = worker.hello.get("isolation")
            v.device = worker.hello.get("device_name", self.device)
            loaded = self._candidate_call(worker, {
                "op": "load", "key": problem.key, "problem": problem.to_dict(), "source": source,
                "class_name": report.candidate_class, "init_seed": self._init_seed,
                "training": prep["training"], "state_fingerprint": prep["state_fingerprint"],
                "mode": self.config.mode, "kernels": report.kernels,
            }, cancel)
            v.settings["parameters"] = loaded["parameters"]
            seen = {"cand": [], "ref": [], "launches": None}
            for i in range(self.config.trials):
                self._trial(problem, worker, i, "initial", i % 2, cancel, v, seen)
            if self.device == "cuda":
                self._time(worker, problem, prep, cancel, v, seen["launches"])
            else:
                v.speed_note = NO_CUDA
            for i in range(self.config.after_timing_trials):
                self._trial(problem, worker, self.config.trials + i, "after_timing", 0, cancel, v, seen)
            if len(set(seen["ref"])) == 1 and len(seen["ref"]) >= 3:
                v.flags.append("the reference output is the same for every input: correctness is vacuous")
            elif len(set(seen["cand"])) == 1 and len(set(seen["ref"])) > 1:
                raise _Fault(V.REJECTED, "the output does not change when the input changes")
        v.correct, v.status = True, V.CORRECT

    def _prepare(self, problem: Problem, cancel) -> dict:
        with self.pool.reference() as ref:
            if problem.key not in self.pool.prepared:
                reply = ref.call({
                    "op": "prepare", "key": problem.key, "problem": problem.to_dict(),
                    "device": self.device, "init_seed": self._init_seed,
                    "training": self.config.training, "probe_seed": secrets.randbits(62),
                }, self.config.compile_timeout_s, cancel)
                if not reply.get("ok"):
                    raise _Fault(V.ERROR, f"the problem cannot be checked: {reply.get('error')}")
                self.pool.prepared[problem.key] = reply
            return self.pool.prepared[problem.key]

    def _reference_call(self, problem: Problem, request: dict, cancel) -> dict:
        """A call that needs the problem prepared; the reference worker keeps only a few."""
        for _ in range(2):
            self._prepare(problem, cancel)
            with self.pool.reference() as ref:
                reply = ref.call(request, self.config.timeout_s, cancel)
                if reply.get("kind") != "unprepared":
                    return reply
                self.pool.prepared.pop(problem.key, None)
        return reply

    def _candidate_call(self, worker, request: dict, cancel, timeout: float | None = None) -> dict:
        reply = worker.call(request, timeout or self.config.timeout_s, cancel)
        tainted = reply.get("tainted") or []
        if tainted:
            worker.kill("tainted: " + "; ".join(tainted))
        if not reply.get("ok"):
            kind = reply.get("kind")
            if kind == "problem":
                raise _Fault(V.ERROR, f"the problem cannot be checked: {reply['error']}")
            if kind == "internal":
                worker.kill("internal error")
                raise _Fault(V.FAILED, f"verifier error while checking it: {reply['error']}")
            raise _Fault(V.REJECTED if kind == "rejected" else V.FAILED, reply["error"])
        if tainted:
            raise _Fault(V.REJECTED, "; ".join(tainted))
        return reply

    def _trial(self, problem, worker, index, phase, extra_calls, cancel, v: Verdict, seen) -> None:
        seed = secrets.randbits(62)
        with self.gpu.shared() if self.device == "cuda" else contextlib.nullcontext():
            r = self._reference_call(problem, {"op": "reference", "key": problem.key, "seed": seed}, cancel)
            if not r.get("ok"):
                raise _Fault(V.ERROR, f"the problem cannot be checked: {r.get('error')}")
            try:
                c = self._candidate_call(worker, {"op": "run", "seed": seed, "extra_calls": extra_calls,
                                                  "reuse_buffers": phase == "after_timing"}, cancel)
            except BaseException:
                with self.pool.reference() as ref:
                    ref.call({"op": "release", "key": problem.key}, self.config.timeout_s)
                raise
            if c["input_fingerprint"] != r["input_fingerprint"]:
                raise _Fault(V.ERROR, f"{problem.inputs_fn}() gives different inputs for the same seed: "
                                      "make it use torch's random generator only")
            with self.pool.reference() as ref:
                cmp = ref.call({"op": "compare", "key": problem.key, "seed": seed, "files": c["files"]},
                               self.config.timeout_s, cancel)
        if seen["launches"] is None:
            seen["launches"] = c["launches"]
            v.triton_kernels = sorted({name.split("[")[0] for name in c["launches"]})
        elif c["launches"] != seen["launches"]:
            raise _Fault(V.REJECTED, f"launches changed between calls ({c['launches']} after "
                                     f"{seen['launches']}): behaviour depends on the call count")
        for op, n in c["pytorch_ops"].items():
            v.pytorch_ops[op] = max(v.pytorch_ops.get(op, 0), n)
        seen["cand"].append(c["output_fingerprint"])
        seen["ref"].append(r["output_fingerprint"])
        trial = Trial(index=index, phase=phase, passed=cmp["passed"],
                      **{k: cmp.get(k) for k in ("max_abs_error", "max_rel_error", "rel_error_norm")},
                      mismatched=cmp.get("mismatched", 0), total=cmp.get("total", 0), note=cmp.get("note", ""))
        v.trials.append(trial)
        if not trial.passed:
            when = (f"on trial {index + 1}" if phase == "initial"
                    else f"on re-check {index + 1} (new inputs in the buffers of earlier calls)")
            raise _Fault(V.INCORRECT, f"wrong output {when}: {trial.note or 'mismatch'}")

    def _time(self, worker, problem, prep, cancel, v: Verdict, launches) -> None:
        c = self.config
        with self.gpu.shared():
            self._candidate_call(worker, {"op": "prepare_timing", "seed": secrets.randbits(62)},
                                 cancel, timeout=c.compile_timeout_s)
        request = {"op": "time", "seeds": [secrets.randbits(62) for _ in range(c.input_sets)],
                   "trials": c.timing_trials, "warmup": c.timing_warmup, "launches": launches}
        timeout = c.timeout_s + 60.0
        with self.gpu.exclusive():
            t = self._candidate_call(worker, request, cancel, timeout=timeout)
        floor_ms = (prep["input_bytes"] + prep["output_bytes"]) / t["bandwidth_bytes_per_ms"]
        timings = self._timings(t, floor_ms)
        if self._implausible(timings):
            request["seeds"] = [secrets.randbits(62) for _ in range(c.input_sets)]
            with self.gpu.exclusive():
                t = self._candidate_call(worker, request, cancel, timeout=timeout)
            timings = self._timings(t, floor_ms)
            if self._implausible(timings):
                v.flags.append("implausible speed (over 10x eager or under the memory-bandwidth "
                               "floor), confirmed by a second measurement")
        cand = timings.candidate
        if cand.wall_median_ms and cand.wall_median_ms > 1.5 * cand.median_ms + 0.1:
            v.flags.append(f"host clock ({cand.wall_median_ms:.3f} ms) far above the events "
                           f"({cand.median_ms:.3f} ms): work outside the timed stream?")
        v.timings = timings
        v.triton_share = t["triton_share"]
        v.speedup_eager = timings.eager.median_ms / cand.median_ms
        if timings.compiled:
            v.speedup_compile = timings.compiled.median_ms / cand.median_ms
        foreign = {k: ms for k, ms in t["kernel_ms"].items() if k not in v.triton_kernels}
        if foreign and c.mode == "strict":
            v.flags.append("non-Triton kernels on the GPU: " + ", ".join(sorted(foreign)[:5]))

    @staticmethod
    def _timings(t: dict, floor_ms: float) -> Timings:
        raw = t["timings"]
        return Timings(
            candidate=Timing(**raw["candidate"]), eager=Timing(**raw["eager"]),
            compiled=Timing(**raw["compiled"]) if "compiled" in raw else None,
            compile_note=t.get("compile_note", ""), memory_floor_ms=floor_ms,
        )

    @staticmethod
    def _implausible(t: Timings) -> bool:
        cand = t.candidate.median_ms
        return t.eager.median_ms / cand > IMPLAUSIBLE_SPEEDUP or (
            t.memory_floor_ms is not None and cand < t.memory_floor_ms
        )
