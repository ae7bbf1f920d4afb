"""Compiling a module's Triton kernels in parallel (GPU workers).

Triton compiles a kernel when it is first launched, one after another, and `@triton.autotune`
compiles each configuration as it benchmarks it: a whole network's first call spends tens of
seconds there. Two ways around it, both through Triton's own asynchronous compile mode
(`AsyncCompileMode`: compiled kernels land in each kernel's cache, as a serial compile would put
them), with the work on a thread pool (parsing and lowering hold the GIL, the assembler does not):

- `compile_ahead(build, inputs)`: one forward call of a copy of the module on the meta device
  in which every launch is a warm-up (compile, no launch): every kernel of the module and every
  configuration of an autotuned one is compiled at once, into Triton's on-disk cache, before
  the first real call (which loads them from there). The copy comes from its own import of the
  source, so nothing the real module holds, or its module keeps, is read or changed.
- `install()`: before an autotuner's first tuning, all of its configurations compile at once
  (where the forward on the meta device stopped early).

A failure in either changes nothing: the kernel compiles at its first launch as it always does.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

_pool: ThreadPoolExecutor | None = None


def _threads(threads: int | None = None) -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        n = threads or min(8, os.cpu_count() or 1)
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="triton-compile")
        # every thread started now: the sandbox counts threads across a candidate's calls, and
        # one started during a call would read as the candidate's
        started = threading.Barrier(n + 1)
        for _ in range(n):
            _pool.submit(started.wait)
        started.wait()
    return _pool


def install(threads: int | None = None) -> bool:
    """Wrap `Autotuner.run`; False where this Triton has no asynchronous compile mode. Call it
    before anything else wraps `run` (the launch recorder must stay the outermost wrapper)."""
    try:
        from triton.runtime import _async_compile, autotuner
    except ImportError:
        return False
    pool = _threads(threads)
    original = autotuner.Autotuner.run
    if hasattr(original, "__wrapped__"):
        return True

    def run(tuner, *args, **kwargs):
        # only a tuner's first tuning (another key: the other input shapes are compiled ahead);
        # after it this costs one attribute read a launch, timed calls included
        if not tuner.cache and len(tuner.configs) > 1 and _async_compile.active_mode.get() is None:
            try:
                with _async_compile.AsyncCompileMode(pool, ignore_errors=True):
                    tuner.warmup(*args, **{k: v for k, v in kwargs.items() if k != "warmup"})
            except Exception:  # noqa: BLE001 - the serial path below compiles and reports
                pass
        return original(tuner, *args, **kwargs)

    run.__wrapped__ = original  # type: ignore[attr-defined]
    autotuner.Autotuner.run = run
    return True


def compile_ahead(build: Callable[[], object], inputs: list) -> str:
    """Compile every kernel a module's forward launches for `inputs`, in parallel, into Triton's
    on-disk cache, without running any: the module's first real call then loads them from
    there. `build()` makes the copy that runs (on the meta device, from its own import of the
    source: whatever the module keeps in its globals is not touched). Returns '' when the forward
    ran through, else why it stopped (the kernels it reached are compiled all the same). Call it
    where the module's own code may run."""
    import torch

    try:
        from triton.runtime import _async_compile
        from triton.runtime.jit import JITFunction, KernelInterface
    except ImportError:
        return "this Triton has no asynchronous compile mode"
    if _async_compile.active_mode.get() is not None:
        return "already compiling ahead"
    meta_inputs = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
                   if isinstance(v, torch.Tensor) else v for v in inputs]
    launch, run = KernelInterface.__getitem__, JITFunction.run

    def warm_up(kernel, grid):  # `kernel[grid](...)`: every configuration of an autotuned one
        return lambda *args, **kwargs: kernel.warmup(*args, grid=grid, **kwargs)

    def warm_only(kernel, *args, grid=None, warmup=True, **kwargs):
        # any other way to a launch (a launcher bound in the constructor, `.run`, a compiled
        # kernel's own `run`) compiles only: a real launch on meta tensors (null pointers) would
        # fault the CUDA context
        return run(kernel, *args, grid=grid, warmup=True, **kwargs)

    try:
        from triton.compiler.compiler import CompiledKernel
        compiled_run = CompiledKernel.__dict__["run"]
    except (ImportError, KeyError):  # pragma: no cover - every supported Triton has both
        CompiledKernel = compiled_run = None

    def no_launch(*args, **kwargs):
        return None

    stopped = ""
    KernelInterface.__getitem__, JITFunction.run = warm_up, warm_only
    if CompiledKernel is not None:  # a compiled kernel the module keeps and launches itself
        CompiledKernel.run = property(lambda compiled: no_launch)
    try:
        try:  # the copy is built inside too: its constructor may bind launchers
            shadow = build()
        except Exception as e:  # noqa: BLE001 - a constructor that needs real values, say
            return f"no copy on the meta device ({type(e).__name__}: {str(e)[:200]})"
        with _async_compile.AsyncCompileMode(_threads(), ignore_errors=True), torch.no_grad():
            try:
                shadow(*meta_inputs)
            except Exception as e:  # noqa: BLE001 - a value read on the meta device, say
                stopped = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        KernelInterface.__getitem__, JITFunction.run = launch, run
        if CompiledKernel is not None:
            CompiledKernel.run = compiled_run
    return stopped
