"""GPU timing inside the candidate worker: candidate, eager and torch.compile, interleaved.

CUDA events around each call, the end event recorded after a device-wide synchronize (so work on
any stream counts, and every function timed pays the same), an L2 flush before every call, inputs
the caller makes for every call, the host clock as a cross-check. The event methods are captured
before candidate code is imported, so patching them later changes nothing here (and is reported
by PatchDetector).
"""

from __future__ import annotations

import time
from typing import Callable

import torch

_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record

L2_FLUSH_BYTES = 256 << 20  # larger than the L2 of an H100 (50 MB) or H200 (60 MB)


def time_interleaved(
    fns: dict[str, Callable[[list], object]],
    inputs_for: Callable[[str, int], list],
    trials: int,
    warmup: int,
    after_call: Callable[[str, int, object], None] | None = None,
) -> dict[str, tuple[list[float], list[float]]]:
    """Time each function `trials` times, rotating the order every round. `inputs_for(name, i)`
    gives the inputs of round i (negative: warm-up), made before the L2 flush, outside the timed
    region; `after_call(name, i, output)` sees each output, outside it too (warm-ups with a
    negative i). Returns, per
    name, the event times and the host-clock times (ms) of its calls in round order."""
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    names = list(fns)
    for name in names:
        for i in range(warmup):
            out = fns[name](inputs_for(name, -1 - i))
            if after_call:
                after_call(name, -1 - i, out)
            del out
    _synchronize()
    samples: dict[str, list[float]] = {n: [] for n in names}
    walls: dict[str, list[float]] = {n: [] for n in names}
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    for i in range(trials):
        for name in names[i % len(names):] + names[: i % len(names)]:
            inputs = inputs_for(name, i)
            flush.zero_()
            _synchronize()
            w0 = _perf_counter()
            _record(start)
            out = fns[name](inputs)
            # every function's timed region ends after a device-wide synchronize, so work left on
            # a side stream counts, and each pays the same wake-up (eager as much as a candidate):
            # a few us in every sample, which pulls the speedups of the shortest calls toward 1
            _synchronize()
            _record(end)
            _synchronize()
            w1 = _perf_counter()
            samples[name].append(_elapsed(start, end))
            walls[name].append((w1 - w0) * 1e3)
            if after_call:
                after_call(name, i, out)
            del out, inputs
    del flush
    return {n: (samples[n], walls[n]) for n in names}


def measure_bandwidth_bytes_per_ms(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    _synchronize()
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    times = []
    for _ in range(10):
        _record(start)
        dst.copy_(src)
        _record(end)
        _synchronize()
        times.append(_elapsed(start, end))
    times.sort()
    return nbytes / times[len(times) // 2]


def kernel_times(run: Callable[[], None], calls: int = 3) -> dict[str, float]:
    """Device time (ms) per kernel name over `calls` runs, from the profiler."""
    from torch.profiler import ProfilerActivity, profile

    _synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        _synchronize()
    totals: dict[str, float] = {}
    for evt in prof.events():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = getattr(evt, "device_time", None)
        if us is None:
            us = getattr(evt, "cuda_time", 0.0)
        totals[evt.name] = totals.get(evt.name, 0.0) + us / 1e3
    return totals
