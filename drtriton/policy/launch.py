"""`DirectLaunch`: the launcher the built-in policy's modules put on each kernel (issue 17).

Triton's `kernel[grid](...)` binds the arguments, builds a specialisation key and looks the
compiled kernel up on every call, and an autotuner adds its own key and lookup: 10-30 us of host
time a launch, more than a small kernel runs, and a whole network at batch 1 waits on it. A
`DirectLaunch` sends a signature's first launch through Triton as usual and keeps the compiled
kernel it used (with the autotuner's choice); later launches with the same signature launch
that compiled kernel directly. A signature holds everything Triton specialises on and more:
each tensor's dtype and address modulo 16 (Triton's alignment), the exact value of every other
argument but floats (their type), the argument count and the keyword values. Anything it cannot
launch directly (the interpreter, `@triton.heuristics`, a configuration with a pre-hook, a grid
that is neither a tuple nor a function, another device than the first launch's) always takes
Triton's path.

The source of this class is copied into every generated module (as `_DirectLaunch`): a
candidate is a standalone file. The verifier records launches at the compiled kernel
(`verify.worker.guard.LaunchRecorder`), so a direct launch reads the same as Triton's own.
"""

from __future__ import annotations

import torch
import triton


class DirectLaunch:
    """`kernel[grid](...)` with Triton's per-call work done once per argument signature: the
    first launch with a signature (tensor dtypes and 16-byte alignment, the other arguments'
    values) goes through Triton, later ones launch the compiled kernel it used directly."""

    LIMIT = 256  # signatures kept per kernel: arguments that change every call go Triton's way

    def __init__(self, kernel):
        self.kernel = kernel
        jit = kernel.fn if isinstance(kernel, triton.runtime.Autotuner) else kernel
        # the compiled function's JITFunction; None under the interpreter or heuristics
        self.jit = jit if isinstance(jit, triton.runtime.JITFunction) else None
        # signature -> (device, compiled kernel, configuration) after its first launch, the
        # direct launch's parts after the second, () for Triton's path every time
        self.launches = {}

    def __getitem__(self, grid):
        if self.jit is None:
            return self.kernel[grid]
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid, args, kwargs):
        key = [len(args), *kwargs.values()]
        for a in args:
            if isinstance(a, torch.Tensor):
                key += (a.dtype, a.data_ptr() % 16)
            else:
                key.append(float if isinstance(a, float) else a)
        key = tuple(key)
        entry = self.launches.get(key)
        if entry is None:  # a new signature: Triton launches, and what it launched is kept
            compiled = self.kernel[grid](*args, **kwargs)
            if len(self.launches) < self.LIMIT:
                # the device after the launch: Triton's first launch in a process starts its
                # driver, and that belongs inside the launch (the verifier's sandbox allows it there)
                device = triton.runtime.driver.active.get_current_device()
                self.launches[key] = (device, compiled, getattr(self.kernel, "best_config", None))
            return compiled
        if len(entry) == 3:
            entry = self.launches[key] = self.direct(*entry, args, kwargs, grid)
        if entry:
            device, current_device, current_stream, run, function, metadata, tail, names = entry
            now = current_device()
            if now == device:
                if not isinstance(grid, tuple):
                    grid = grid(dict(zip(names, args + tail)))
                grid_x, grid_y, grid_z = (*grid, 1, 1)[:3]
                run(grid_x, grid_y, grid_z, current_stream(now), function, metadata, None, None, None, *args, *tail)
                return None
        return self.kernel[grid](*args, **kwargs)

    def direct(self, device, compiled, config, args, kwargs, grid):
        """The parts of a direct launch of `compiled` (launched first on `device` with the
        autotuner's `config`), or () where Triton must launch."""
        meta = {}
        if isinstance(self.kernel, triton.runtime.Autotuner):
            if config is None or config.pre_hook is not None:
                return ()
            meta = config.kwargs
        driver = triton.runtime.driver.active
        if compiled is None or not (isinstance(grid, tuple) or callable(grid)) or driver.get_current_device() != device:
            return ()
        given = {**meta, **kwargs}
        names = list(self.jit.arg_names)
        rest = list(zip(names[len(args):], self.jit.params[len(args):]))
        if any(n not in given and not p.has_default for n, p in rest):
            return ()
        tail = tuple(given[n] if n in given else p.default for n, p in rest)
        run = compiled.run  # loads the kernel onto the device: `function` is set after it
        return (device, driver.get_current_device, driver.get_current_stream, run, compiled.function,
                compiled.packed_metadata, tail, names)
