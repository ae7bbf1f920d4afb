"""`DirectLaunch`: the launcher the built-in policy's modules put on each kernel (issue 17).

Triton's `kernel[grid](...)` binds the arguments, builds a specialisation key and looks the
compiled kernel up on every call, and an autotuner adds its own key and lookup: 10-30 us of host
time a launch, more than a small kernel runs, and a whole network at batch 1 waits on it. A
`DirectLaunch` sends a signature's first launch through Triton as usual and keeps the compiled
kernel it used (with the autotuner's choice); later launches with the same signature launch
that compiled kernel directly. A signature holds everything Triton specialises on and more:
each tensor's dtype and address modulo 16 (Triton's alignment), the type and exact value of
every other argument, the argument count and the keywords' names. Anything it cannot launch
directly always takes Triton's path: the interpreter, `@triton.heuristics`, a configuration
with a pre-hook, arguments other than tensors, numbers, strings and None, a grid that is
neither a tuple nor a function, another device than the first launch's.

A direct launch skips what Triton's path adds around the launcher: its launch hooks
(`knobs.runtime.launch_enter_hook`, which profilers such as Proton use), `pre_run_hooks` and
the check that the kernel's globals have not changed.

The source of this class is copied into every generated module (as `_DirectLaunch`): a
candidate is a standalone file. On the GPU the verifier records launches at the compiled
kernel (`verify.worker.guard.LaunchRecorder`), so a direct launch reads as Triton's own does.
"""

from __future__ import annotations

import torch
import triton


class DirectLaunch:
    """`kernel[grid](...)` with Triton's per-call work done once per argument signature: the
    first launch with a signature (tensor dtypes and 16-byte alignment, the other arguments'
    types and values) goes through Triton, later ones launch the compiled kernel it used."""

    LIMIT = 256  # signatures kept per kernel: arguments that change every call go Triton's way
    PLAIN = (int, float, bool, str, type(None))  # hashable arguments a signature holds as they are

    def __init__(self, kernel):
        self.kernel = kernel
        jit = kernel.fn if isinstance(kernel, triton.runtime.Autotuner) else kernel
        # the compiled function's JITFunction; None under the interpreter or heuristics
        self.jit = jit if isinstance(jit, triton.runtime.JITFunction) else None
        # signature -> its state: (device, compiled kernel, configuration) after the first
        # launch; after the second, the 9 parts of a direct launch, or () for Triton's path
        self.launches = {}
        self.layouts = {}  # argument types -> positions of the tensors and the plain values

    def __getitem__(self, grid):
        if self.jit is None:
            return self.kernel[grid]
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def signature(self, args, kwargs):
        """The key of a launch, or None where an argument cannot be part of one: the arguments'
        types, the plain ones' values, each tensor's dtype and address modulo 16. A call site
        passes the same types every call, so which positions hold tensors is worked out once
        per tuple of types (`layouts`): this runs on every launch."""
        values = (*args, *kwargs.values()) if kwargs else args
        kinds = tuple(map(type, values))
        layout = self.layouts.get(kinds)
        if layout is None:
            layout = self.layouts[kinds] = self.layout(kinds)
        if not layout:
            return None
        tensors, plain = layout
        key = [kinds, *kwargs, *[values[i] for i in plain]]  # kinds: True and 1 compile differently
        for i in tensors:
            t = values[i]
            key += (t.dtype, t.data_ptr() % 16)
        return tuple(key)

    def layout(self, kinds):
        """(tensor positions, plain positions) of arguments of these types; () where one is
        neither a tensor nor a plain value."""
        if len(self.layouts) >= self.LIMIT:
            self.layouts.clear()
        tensors = tuple(i for i, k in enumerate(kinds) if issubclass(k, torch.Tensor))
        plain = tuple(i for i, k in enumerate(kinds) if k in self.PLAIN)
        return (tensors, plain) if len(tensors) + len(plain) == len(kinds) else ()

    def launch(self, grid, args, kwargs):
        key = self.signature(args, kwargs)
        entry = self.launches.get(key) if key is not None else ()
        if entry is None:  # a new signature: Triton launches, and what it launched is kept
            compiled = self.kernel[grid](*args, **kwargs)
            if len(self.launches) < self.LIMIT:
                # the device after the launch: Triton's first launch in a process starts its
                # driver, and that belongs inside the launch (the verifier's sandbox allows it there)
                device = triton.runtime.driver.active.get_current_device()
                self.launches[key] = (device, compiled, getattr(self.kernel, "best_config", None))
            return compiled
        if len(entry) == 3:
            entry = self.launches[key] = self.direct(*entry, args, kwargs)
        if entry and (type(grid) is tuple or callable(grid)):
            device, current_device, current_stream, compiled, run, function, metadata, tail, names = entry
            now = current_device()
            if now == device:
                if type(grid) is not tuple:
                    grid = grid(dict(zip(names, args + tail)))
                grid_x, grid_y, grid_z = (*grid, 1, 1)[:3]
                run(grid_x, grid_y, grid_z, current_stream(now), function, metadata, None, None, None, *args, *tail)
                return compiled
        return self.kernel[grid](*args, **kwargs)

    def direct(self, device, compiled, config, args, kwargs):
        """The parts of a direct launch of `compiled` (launched first on `device` with the
        autotuner's `config`), or () where Triton must launch."""
        meta = {}
        if isinstance(self.kernel, triton.runtime.Autotuner):
            if config is None or config.pre_hook is not None:
                return ()
            meta = config.kwargs
        # still compiling (a forward on the meta device compiling ahead): not waited for here
        if compiled is None or hasattr(compiled, "result"):
            return ()
        driver = triton.runtime.driver.active
        if driver.get_current_device() != device:
            return ()
        if any(isinstance(v, torch.Tensor) for v in kwargs.values()):
            return ()  # kept in the launch's tail, a tensor given by keyword would be the first call's
        given = {**meta, **kwargs}
        names = list(self.jit.arg_names)
        rest = list(zip(names[len(args):], self.jit.params[len(args):]))
        if any(n not in given and not p.has_default for n, p in rest):
            return ()
        tail = tuple(given[n] if n in given else p.default for n, p in rest)
        run = compiled.run  # loads the kernel onto the device: `function` is set after it
        return (device, driver.get_current_device, driver.get_current_stream, compiled, run, compiled.function,
                compiled.packed_metadata, tail, names)
