"""The verdict: a plain record of what the verifier found, and the settings it ran with.

Everything downstream reads these records: the CLI prints them, the language server turns them
into diagnostics, the search ranks candidates by them, RL turns them into rewards. They hold
only JSON-friendly values so they cross process boundaries and land in files unchanged.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields

# Statuses, from best to worst. "error" means the problem (not the candidate) is broken.
CORRECT = "correct"
INCORRECT = "incorrect"  # ran, honestly, but computed something else
REJECTED = "rejected"  # cheating or a rule broken (static or at run time)
FAILED = "failed"  # did not run to the end: compile error, exception, crash, hang, OOM
ERROR = "error"  # the reference problem could not be built or fed


# A strict check's reason when the dispatcher saw PyTorch compute in forward (mixed mode allows it)
STRICT_PYTORCH_COMPUTE = "PyTorch computes in forward (strict mode allows only allocation, views and copies)"


def launched_kernel(signature: str) -> str:
    """The kernel name in a launch signature, `name[grid](scalars)` (worker.guard writes them)."""
    return signature.split("[", 1)[0].split("(", 1)[0]


def same_launches(launches: list[str], expected: list[str], sizes_follow_data: bool = False,
                  tuned: dict[str, list[str]] | None = None) -> bool:
    """Whether a call launched what the verified call did: the same signatures (kernels, grids,
    integer arguments), or, where forward's sizes follow the input values (x[mask], nonzero: a
    forward on fake tensors says so, or the reference's outputs changed shape between trials), the
    same kernels in the same order, since their sizes and grids follow the data too. `tuned`:
    the autotuned kernels that chose again since (name -> their meta-parameters): their grids
    and those meta-parameters may differ, nothing else (`untuned`)."""
    if sizes_follow_data:
        return [launched_kernel(s) for s in launches] == [launched_kernel(s) for s in expected]
    if tuned:
        return [untuned(s, tuned) for s in launches] == [untuned(s, tuned) for s in expected]
    return launches == expected


def untuned(signature: str, tuned: dict[str, list[str]]) -> str:
    """A launch signature without what an autotuner's choice decides, for a kernel in `tuned`:
    its grid and its meta-parameters, `name(the other arguments)`; any other kernel's as it is."""
    name = launched_kernel(signature)
    meta = tuned.get(name)
    if meta is None:
        return signature
    scalars = signature[signature.index("(") + 1:-1] if "(" in signature else ""
    kept = [s for s in scalars.split(",") if s and s.split("=", 1)[0] not in meta]
    return f"{name}({','.join(kept)})"


_HEAVY_OPS = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "tensordot", "mv",
              "addmv", "dot", "vdot", "addr", "scaled_mm", "int_mm", "cdist", "bilinear",
              "lstm", "gru", "rnn_tanh", "rnn_relu", "embedding_bag"}


def is_heavy_op(op: str) -> bool:
    """`convolution.default`, `addmm.default`, `_scaled_dot_product_flash_attention...`: an op
    whose work is a library's (cuBLAS, cuDNN, flash attention) when PyTorch runs it."""
    base = op.split(".")[0].lstrip("_")
    return base in _HEAVY_OPS or base.startswith(("conv", "cudnn", "mkldnn", "miopen")) or "scaled_dot_product" in base


#: a candidate whose kernels keep the GPU busy less than this share of a call is host-bound
HOST_BOUND_BUSY = 0.7

@dataclass
class Tolerance:
    atol: float
    rtol: float
    max_rel_error_norm: float  # ||out - ref|| / ||ref||: rejects near-constant outputs

    @classmethod
    def for_dtype(cls, dtype: str) -> "Tolerance":
        """KernelBench's allclose tolerances, plus a relative-error-norm bound per precision."""
        if dtype in ("torch.float16", "torch.bfloat16"):
            return cls(atol=1e-2, rtol=1e-2, max_rel_error_norm=2e-2)
        if dtype == "torch.float64":
            return cls(atol=1e-7, rtol=1e-7, max_rel_error_norm=1e-6)
        return cls(atol=1e-4, rtol=1e-4, max_rel_error_norm=1e-3)


@dataclass
class Trial:
    """One comparison of the candidate's output with the reference's on fresh inputs."""

    index: int
    phase: str  # "initial", "after_timing" or "other_shapes" (a second input configuration)
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    rel_error_norm: float | None = None
    mismatched: int = 0  # elements outside the allclose tolerance
    total: int = 0
    note: str = ""


@dataclass
class Timing:
    """Milliseconds per call over `trials` timed calls."""

    median_ms: float
    p25_ms: float
    p75_ms: float
    min_ms: float
    mean_ms: float
    trials: int
    wall_median_ms: float | None = None  # host clock around a device-wide synchronize

    @property
    def spread(self) -> float:
        """Interquartile range over the median."""
        return (self.p75_ms - self.p25_ms) / self.median_ms if self.median_ms else math.inf

    @classmethod
    def from_samples(cls, samples: list[float], wall: list[float] | None = None) -> "Timing":
        s = sorted(samples)
        n = len(s)

        def q(p: float) -> float:
            return s[min(n - 1, max(0, round(p * (n - 1))))]

        wall_median = sorted(wall)[len(wall) // 2] if wall else None
        return cls(q(0.5), q(0.25), q(0.75), s[0], sum(s) / n, n, wall_median)


@dataclass
class Timings:
    candidate: Timing  # on new input values every call
    eager: Timing
    compiled: Timing | None = None  # torch.compile (Inductor, default mode); None if it failed
    compile_note: str = ""
    memory_floor_ms: float | None = None  # bytes of inputs and outputs over measured bandwidth
    replayed: Timing | None = None  # the candidate's calls on the previous call's inputs again
    outputs_checked: int = 0  # timed calls whose outputs were compared with the reference


@dataclass
class GraphTimings:
    """The CUDA-graph option (`drtriton.cuda_graph`): the verified forward captured once and
    replayed, timed in a run of its own beside eager and torch.compile(mode="reduce-overhead"),
    replays checked against the reference. `note` says why there is no timing (forward could not
    be captured, or its replays computed something else) or what else happened."""

    candidate: Timing | None = None
    eager: Timing | None = None
    compiled: Timing | None = None  # torch.compile(mode="reduce-overhead"): CUDA graphs too
    note: str = ""

    @property
    def speedup_eager(self) -> float | None:
        return self.eager.median_ms / self.candidate.median_ms if self.candidate and self.eager else None

    @property
    def speedup_compile(self) -> float | None:
        return self.compiled.median_ms / self.candidate.median_ms if self.candidate and self.compiled else None

    @classmethod
    def from_dict(cls, d: dict) -> "GraphTimings":
        return cls(**{k: Timing(**d[k]) if d.get(k) else None for k in ("candidate", "eager", "compiled")},
                   note=d.get("note", ""))


@dataclass
class Verdict:
    correct: bool
    status: str
    reasons: list[str] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    triton_kernels: list[str] = field(default_factory=list)  # launched during forward
    pytorch_ops: dict[str, int] = field(default_factory=dict)  # PyTorch compute ops in forward
    triton_share: float | None = None  # share of device time in Triton kernels (GPU only)
    # where one call's device time goes: the heaviest kernels (Triton's and the library's), ms,
    # and all of its kernels together (GPU only)
    kernel_ms: dict[str, float] = field(default_factory=dict)
    kernels_total_ms: float | None = None
    flags: list[str] = field(default_factory=list)  # noteworthy but not disqualifying
    timings: Timings | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    speed_note: str = ""
    device: str = ""
    settings: dict = field(default_factory=dict)
    elapsed_s: float = 0.0
    phases_s: dict[str, float] = field(default_factory=dict)  # where the time went
    # the input configurations checked, each the shapes of the tensor inputs: get_inputs()'s,
    # then (full checks) one with another leading dimension, where the reference takes it
    shapes_checked: list[list[list[int]]] = field(default_factory=list)
    graph: GraphTimings | None = None  # asked for with VerifyConfig.cuda_graph (GPU only)

    @property
    def triton_computes(self) -> bool:
        """Whether Triton does part of the computation: a kernel ran and, where the GPU time
        was measured, took at least 1% of it. A plan without is no conversion."""
        return bool(self.triton_kernels) and (self.triton_share is None or self.triton_share >= 0.01)

    @property
    def gpu_busy(self) -> float | None:
        """The share of a timed call during which the candidate's kernels keep the GPU busy:
        well under 1, the time between kernels is host work (the Python of each launch)."""
        if self.kernels_total_ms is None or self.timings is None or not self.timings.candidate.median_ms:
            return None
        return min(1.0, self.kernels_total_ms / self.timings.candidate.median_ms)

    @property
    def host_bound(self) -> bool:
        """Its kernels leave the GPU idle much of a call: host work sets the speed."""
        return self.gpu_busy is not None and self.gpu_busy < HOST_BOUND_BUSY

    @property
    def heavy_ops_in_pytorch(self) -> list[str]:
        """The PyTorch ops left in forward that carry a model's arithmetic (GEMM, convolution,
        attention, recurrent layers): a speedup with these in cuBLAS / cuDNN is theirs."""
        return sorted(op for op in self.pytorch_ops if is_heavy_op(op))

    @property
    def summary(self) -> str:
        """One line a user can read: what the editor shows on the class."""
        if not self.correct:
            why = self.reasons[0] if self.reasons else self.status
            return f"{self.status}: {why}"
        own = [t for t in self.trials if t.phase != "other_shapes"]  # on get_inputs()'s shapes
        passed = sum(t.passed for t in own)
        parts = [f"correct on {passed}/{len(own)} trials"]
        if not self.triton_computes:
            parts[0] += ", but not a conversion: no computation runs in Triton"
        if self.speedup_eager is not None:
            parts.append(f"{self.speedup_eager:.2f}x vs eager")
        if self.speedup_compile is not None:
            parts.append(f"{self.speedup_compile:.2f}x vs torch.compile")
        if self.triton_share is not None:
            parts.append(f"{self.triton_share:.0%} of GPU time in Triton")
        if self.speed_note:
            parts.append(f"speed {self.speed_note}")
        if self.graph and self.graph.speedup_eager is not None:
            parts.append(f"replayed as a CUDA graph {self.graph.speedup_eager:.2f}x vs eager")
        if self.pytorch_ops:
            ops = sorted(self.pytorch_ops.items(), key=lambda kv: -kv[1])
            shown = ", ".join(k.split(".")[0] for k, _ in ops[:4]) + (", ..." if len(ops) > 4 else "")
            parts.append(f"PyTorch still runs {shown}")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict) -> "Verdict":
        d = dict(d)
        d["trials"] = [Trial(**t) for t in d.get("trials", [])]
        t = d.get("timings")
        if t:
            d["timings"] = Timings(
                candidate=Timing(**t["candidate"]),
                eager=Timing(**t["eager"]),
                compiled=Timing(**t["compiled"]) if t.get("compiled") else None,
                compile_note=t.get("compile_note", ""),
                memory_floor_ms=t.get("memory_floor_ms"),
                replayed=Timing(**t["replayed"]) if t.get("replayed") else None,
                outputs_checked=t.get("outputs_checked", 0),
            )
        if d.get("graph"):
            d["graph"] = GraphTimings.from_dict(d["graph"])
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
