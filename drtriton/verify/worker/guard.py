"""Run-time observation of a candidate's forward, inside the candidate worker.

- `LaunchRecorder`: which Triton kernels a forward launches, with their grids and integer
  arguments (wraps the launch entry points of `@triton.jit` functions, compiled or interpreted,
  and the autotuner). The harness compares every call's launch sequence with the verified one,
  so behaviour that changes across calls (caching, warm-up tricks) shows.
- `ForwardAccountant`: a PyTorch dispatch mode that records every PyTorch op the forward runs
  (outside Triton launches), sorts it into allocation / view / copy / compute, and fills fresh
  allocations with NaN so outputs a kernel never wrote cannot pass.
- `PatchDetector`: a snapshot of the functions, flags and hooks the verifier and the timed
  references rely on; any that change is a rejection (patched timers, comparisons,
  synchronisation, randomness, PyTorch functions, backend settings, global module hooks).
"""

from __future__ import annotations

import _thread
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Ops that only allocate (their contents are filled or poisoned) or create constants.
_ALLOCATIONS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones",
    "full", "full_like", "new_full", "fill", "fill_", "zero_", "scalar_tensor", "arange",
    "lift_fresh", "lift_fresh_copy", "resize_",
}
_UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
_VIEWS = {
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "as_strided_", "expand",
    "expand_as", "permute", "transpose", "transpose_", "t", "t_", "unsqueeze", "unsqueeze_",
    "squeeze", "squeeze_", "select", "slice", "narrow", "split", "split_with_sizes", "chunk",
    "unbind", "alias", "detach", "detach_", "diagonal", "unfold", "view_as", "movedim",
    "flatten", "unflatten", "contiguous",
}
_METADATA = {
    "size", "stride", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "numel",
    "dim", "is_contiguous", "is_same_size", "storage_offset", "_local_scalar_dense",
    "is_nonzero", "_has_compatible_shallow_copy_type", "_to_dense",
}
_COPIES = {"clone", "copy_", "_to_copy", "_copy_from", "_copy_from_and_resize"}
_INT_POISON = -1234567  # what a never-written integer element reads as


def _is_cast_or_move(name: str, args, kwargs, out) -> bool:
    """A copy that changes dtype or device is compute (a cast) or a transfer, not layout."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if isinstance(out, torch.Tensor):
        tensors.append(out)
    dtypes = {t.dtype for t in tensors}
    devices = {t.device.type for t in tensors}
    return len(dtypes) > 1 or len(devices) > 1


def poison(t: torch.Tensor) -> None:
    """Fill a fresh allocation so that elements a kernel never writes cannot look right."""
    if t.numel() == 0:
        return
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:  # the most unlikely value the dtype holds (int16's range ends at 32767, unsigned ones at 0)
        info = torch.iinfo(t.dtype)
        t.fill_(next(v for v in (_INT_POISON, -12345, 77) if info.min <= v <= info.max))


class LaunchRecorder:
    """Records the Triton launches of a forward call (Python-level wrappers only: no per-launch
    hook in Triton's C launcher, which would slow every launch of the timed calls).

    On the GPU every launch reaches the device through a compiled kernel's `run` (Triton's own
    `kernel[grid](...)` and a launch of a compiled kernel kept by the module alike, such as the
    built-in policy's `DirectLaunch`): that is where a launch is recorded, so both read the
    same. The launches of the kernel an autotuner is timing are not the call's (the call is
    marked `benchmarked`). The interpreter has no compiled kernels: there the outermost
    `kernel[grid](...)` is recorded, positional constexprs among the integers."""

    def __init__(self) -> None:
        self.depth = 0  # >0 while inside a launch entry point (autotuner benchmarking nests launches)
        # the kernels autotuners are timing now: their launches meanwhile are not the call's
        self.tuning: list = []
        self.benchmarked = False  # an autotuner timed configurations during the recorded call
        # the recorded call's launches (`launch_record`: the kernel, a fixed grid, the integer
        # arguments; no tensors kept alive), None when not recording; named by
        # `launch_signatures` after the call, outside the timed region
        self.launches: list[tuple] | None = None
        self._installed = False

    @property
    def inside_launch(self) -> bool:
        return self.depth > 0

    def install(self) -> None:
        if self._installed:
            return
        from triton.runtime import autotuner, jit

        targets = [jit.JITFunction, autotuner.Autotuner, autotuner.Heuristics]
        try:
            from triton.runtime import interpreter

            targets.append(interpreter.InterpretedFunction)
        except ImportError:  # pragma: no cover - every supported Triton has the interpreter
            pass
        for cls in targets:
            self._wrap(cls)
        self._wrap_benchmarking(autotuner.Autotuner)
        try:
            from triton.compiler.compiler import CompiledKernel
        except ImportError:  # pragma: no cover - every supported Triton has it
            CompiledKernel = None
        if CompiledKernel is not None:
            self._wrap_compiled(CompiledKernel)
        self._installed = True

    def _wrap(self, cls) -> None:
        original = cls.run
        recorder = self

        def run(kernel_self, *args, **kwargs):
            outermost = recorder.depth == 0
            recorded = len(recorder.launches) if recorder.launches is not None else 0
            recorder.depth += 1
            try:
                return original(kernel_self, *args, **kwargs)
            finally:
                recorder.depth -= 1
                # recorded here only when no compiled kernel's launch was (the interpreter)
                if outermost and recorder.launches is not None and not kwargs.get("warmup", False) \
                        and not recorder.tuning and len(recorder.launches) == recorded:
                    recorder.launches.append(launch_record(kernel_self, args, kwargs))

        run.__wrapped__ = original  # type: ignore[attr-defined]
        cls.run = run

    def _wrap_benchmarking(self, cls) -> None:
        original = getattr(cls, "_bench", None)
        if original is None:  # pragma: no cover - Triton 3.x autotuners time through _bench
            return
        recorder = self

        def bench(tuner, *args, **kwargs):
            kernel = tuner.fn
            while hasattr(kernel, "fn") and not hasattr(kernel, "params"):  # Heuristics -> JITFunction
                kernel = kernel.fn
            recorder.tuning.append(kernel)
            if recorder.launches is not None:
                recorder.benchmarked = True
            try:
                return original(tuner, *args, **kwargs)
            finally:
                recorder.tuning.pop()

        bench.__wrapped__ = original  # type: ignore[attr-defined]
        cls._bench = bench

    def _wrap_compiled(self, cls) -> None:
        original = cls.__dict__.get("run")
        if not isinstance(original, property):  # pragma: no cover - every supported Triton has it
            # launches would go unrecorded: no check may run on such a Triton
            raise RuntimeError("this Triton's CompiledKernel has no `run` property to record launches at")
        recorder = self

        def run(compiled):
            launcher = original.fget(compiled)

            def launch(grid_x, grid_y, grid_z, stream, function, metadata, launch_metadata, enter_hook,
                       exit_hook, *args):
                if recorder.launches is not None:
                    record = compiled_launch_record(compiled, (grid_x, grid_y, grid_z), args)
                    if not any(record[0] is kernel for kernel in recorder.tuning):
                        recorder.launches.append(record)
                return launcher(grid_x, grid_y, grid_z, stream, function, metadata, launch_metadata,
                                enter_hook, exit_hook, *args)

            return launch

        wrapped = property(run)
        wrapped.fget.__wrapped__ = original  # type: ignore[attr-defined]
        cls.run = wrapped

    def begin_call(self) -> None:
        self.launches = []
        self.benchmarked = False

    def end_call(self) -> list[tuple]:
        """The call's launches, raw: `launch_signatures` names them."""
        launches, self.launches = self.launches, None
        return launches or []


_NOT_ARGUMENTS = {"grid", "warmup"}


def launch_record(kernel, args: tuple, kwargs: dict) -> tuple:
    """What a launch's signature is made of, taken at the launch: the kernel, the grid when fixed
    (a copy: a list changed later cannot alter it), the integer and boolean arguments."""
    grid = kwargs.get("grid")
    fixed = tuple(grid) if isinstance(grid, (tuple, list)) and all(isinstance(g, int) for g in grid) else None
    return (kernel, fixed, tuple(a for a in args if isinstance(a, int)),
            tuple((k, v) for k, v in kwargs.items() if k not in _NOT_ARGUMENTS and isinstance(v, int)))


def compiled_launch_record(compiled, grid: tuple, args: tuple) -> tuple:
    """`launch_record` for a compiled kernel's launch: its `@triton.jit` function, the grid
    without trailing 1s, the integer and boolean arguments, the meta-parameters (constexprs) by
    name as `kernel[grid](...)`'s keywords read."""
    grid = tuple(grid)
    while len(grid) > 1 and grid[-1] == 1:
        grid = grid[:-1]
    kernel = getattr(getattr(compiled, "src", None), "fn", compiled)
    params = getattr(kernel, "params", None) or []
    ints, meta = [], []
    for i, a in enumerate(args):
        if isinstance(a, int):
            param = params[i] if i < len(params) else None
            if param is not None and param.is_constexpr:
                meta.append((param.name, a))
            else:
                ints.append(a)
    return (kernel, grid, tuple(ints), tuple(meta))


def launch_signatures(records: list[tuple]) -> list[str]:
    return [_signature(*r) for r in records]


def launch_signature(kernel, args: tuple, kwargs: dict) -> str:
    """`name[grid](scalars)`: the grid when fixed (a grid function depends on the chosen
    configuration), and the integer and boolean arguments (sizes, strides, loop bounds, flags),
    which a call that does other work than the verified one would change. Float arguments are
    left out: a scale read from the data (`.item()`) legitimately changes from call to call."""
    return _signature(*launch_record(kernel, args, kwargs))


def _signature(kernel, grid: tuple | None, ints: tuple, int_kwargs: tuple) -> str:
    name = kernel_name(kernel) + (f"[{','.join(map(str, grid))}]" if grid is not None else "")
    scalars = [repr(a) for a in ints] + [f"{k}={v!r}" for k, v in sorted(int_kwargs)]
    return f"{name}({','.join(scalars)})"


def kernel_name(kernel) -> str:
    fn = kernel
    while hasattr(fn, "fn"):  # Autotuner/Heuristics -> JITFunction -> python function
        fn = fn.fn
    return getattr(fn, "__name__", type(kernel).__name__)


@dataclass
class ForwardAccount:
    compute: Counter = field(default_factory=Counter)  # PyTorch compute ops (the "mixed" part)
    copies: Counter = field(default_factory=Counter)  # layout copies (contiguous, clone)
    allocations: int = 0


class ForwardAccountant(TorchDispatchMode):
    """Sees every PyTorch op run on tensors while active, except inside Triton launches."""

    def __init__(self, recorder: LaunchRecorder, poison_allocations: bool = True):
        super().__init__()
        self.recorder = recorder
        self.poison_allocations = poison_allocations
        self.account = ForwardAccount()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.recorder.inside_launch:  # the interpreter's own host copies
            return out
        name = func.overloadpacket.__name__
        if name in _ALLOCATIONS:
            self.account.allocations += 1
            if self.poison_allocations and name in _UNINITIALISED and isinstance(out, torch.Tensor):
                poison(out)
        elif name in _VIEWS or name in _METADATA:
            pass
        elif name in _COPIES and not _is_cast_or_move(name, args, kwargs, out):
            self.account.copies[name] += 1
        else:
            self.account.compute[str(func).removeprefix("aten.")] += 1
        return out


class PatchDetector:
    """Identity snapshot of what the verifier and the timed references rely on, taken before
    candidate code is imported: the verifier's own functions, every function of PyTorch's public
    namespaces (a slowed `torch.relu` would slow eager, not the candidate), the methods of
    `torch.Tensor`, `nn.Module`'s call path, settings that change arithmetic or speed, and the global
    module hooks (a hook runs inside the reference's forward: it could slow it or read its
    outputs)."""

    _NAMESPACES = ("torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft")

    def __init__(self) -> None:
        self._targets = self._collect()
        self._snapshot = {key: self._get(obj, attr) for key, (obj, attr) in self._targets.items()}
        self._modules = {name: sys.modules.get(name) for name in ("torch", "triton", "time", "math", "random", "secrets")}
        self._functions = self._torch_functions()
        # torch.Tensor and the layers (eager runs their methods); not nn.Module's own dict:
        # torch.compile legitimately wraps its __init__ and __setstate__
        layers = [v for v in vars(torch.nn).values() if isinstance(v, type) and issubclass(v, torch.nn.Module)
                  and v is not torch.nn.Module]
        self._classes = {cls: dict(vars(cls)) for cls in (torch.Tensor, *layers)}
        # the names the layers' modules call through (`F.conv2d` in torch.nn.modules.conv)
        self._layer_modules = {name: dict(vars(m)) for name, m in list(sys.modules.items())
                               if name.startswith("torch.nn.modules.") and m is not None}
        self._flags = self._settings()
        self._hooks = self._global_hooks()

    @staticmethod
    def _settings() -> tuple:
        b = torch.backends
        return (
            b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, torch.get_float32_matmul_precision(),
            torch.get_default_dtype(), b.cuda.matmul.allow_fp16_reduced_precision_reduction,
            b.cuda.matmul.allow_bf16_reduced_precision_reduction, b.cudnn.enabled, b.cudnn.benchmark,
            b.cudnn.deterministic, torch.are_deterministic_algorithms_enabled(), b.cuda.flash_sdp_enabled(),
            b.cuda.mem_efficient_sdp_enabled(), b.cuda.math_sdp_enabled(), b.cuda.cudnn_sdp_enabled(),
        )

    @staticmethod
    def _global_hooks() -> tuple:
        from torch.nn.modules import module

        names = [n for n in vars(module) if n.startswith("_global_") and n.endswith("hooks")]
        return tuple((n, tuple(id(h) for h in getattr(module, n).values())) for n in sorted(names))

    def _torch_functions(self) -> dict:
        out = {}
        for name in self._NAMESPACES:
            for attr, value in vars(sys.modules[name]).items():
                if not attr.startswith("__") and callable(value) and not isinstance(value, type(sys)):
                    out[(name, attr)] = value
        return out

    @staticmethod
    def _get(obj, attr):
        return getattr(obj, attr, None)

    @staticmethod
    def _collect() -> dict:
        import random
        import secrets

        from triton.runtime import autotuner, jit

        pairs = [
            (torch, "allclose"), (torch, "isclose"), (torch, "equal"), (torch, "empty"),
            (torch, "empty_like"), (torch, "manual_seed"), (torch.Tensor, "clone"),
            (torch.Tensor, "copy_"), (torch.Tensor, "data_ptr"), (torch.Tensor, "cpu"),
            (torch.Tensor, "contiguous"), (torch.Tensor, "__eq__"), (torch.Tensor, "__sub__"),
            (torch.Tensor, "abs"), (torch.Tensor, "float"), (torch.Tensor, "to"),
            (torch.nn.Module, "__call__"), (torch.nn.Module, "_call_impl"),
            (torch.cuda, "synchronize"), (torch.cuda, "Event"), (torch.cuda, "current_stream"),
            (torch.cuda, "memory_allocated"),
            (torch.cuda.Event, "elapsed_time"), (torch.cuda.Event, "record"),
            (torch.cuda.Event, "synchronize"), (torch.profiler, "profile"),
            (time, "perf_counter"), (time, "perf_counter_ns"), (time, "time"), (time, "monotonic"),
            (jit.JITFunction, "run"), (autotuner.Autotuner, "run"), (autotuner.Heuristics, "run"),
            (autotuner.Autotuner, "_bench"),
            (sys, "audit"), (sys, "addaudithook"),
            # the verifier's randomness: seeds, which timed calls repeat inputs or are checked
            (secrets, "randbits"), (random.SystemRandom, "random"), (random.SystemRandom, "getrandbits"),
            (random, "_urandom"),
        ]
        try:
            from triton.compiler.compiler import CompiledKernel

            pairs.append((CompiledKernel, "run"))  # where launches are recorded (a property)
        except ImportError:  # pragma: no cover
            pass
        try:
            from triton.runtime import interpreter

            pairs.append((interpreter.InterpretedFunction, "run"))
        except ImportError:  # pragma: no cover
            pass
        try:
            import triton

            pairs.append((triton.knobs.runtime, "launch_enter_hook"))
        except AttributeError:  # pragma: no cover
            pass
        return {f"{getattr(o, '__name__', type(o).__name__)}.{a}": (o, a) for o, a in pairs}

    def changed(self) -> list[str]:
        """Names of the patched functions, changed modules, settings or hooks (empty when
        untouched)."""
        found = [
            key for key, (obj, attr) in self._targets.items()
            if self._get(obj, attr) is not self._snapshot[key]
        ]
        found += [f"{ns}.{attr}" for (ns, attr), fn in self._functions.items()
                  if vars(sys.modules[ns]).get(attr) is not fn and f"{ns}.{attr}" not in found]
        for cls, before in self._classes.items():
            now = vars(cls)
            if len(now) != len(before) or any(now.get(k) is not v for k, v in before.items()):
                found += [f"{cls.__name__}.{k}" for k in sorted(set(now) | set(before))
                          if now.get(k) is not before.get(k) and f"{cls.__name__}.{k}" not in found]
        for name, before in self._layer_modules.items():
            now = vars(sys.modules[name]) if sys.modules.get(name) is not None else {}
            found += [f"{name}.{k}" for k, v in before.items() if now.get(k) is not v]
        found += [f"sys.modules[{n!r}]" for n, m in self._modules.items() if sys.modules.get(n) is not m]
        if self._settings() != self._flags:
            found.append("PyTorch settings (TF32 / reduced precision / cuDNN / deterministic / attention backends)")
        if self._global_hooks() != self._hooks:
            found.append("global module hooks (torch.nn.modules.module.register_module_*_hook)")
        return found


def python_thread_count() -> int:
    """Threads started from Python (threading or _thread), not the runtime's own."""
    return _thread._count()
