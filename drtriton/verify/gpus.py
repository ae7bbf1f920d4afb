"""Several GPUs of one node: one verifier per GPU, work dealt out to them.

Each verifier's workers see only their GPU (CUDA_VISIBLE_DEVICES), and each GPU has its own lock,
so timing on one GPU holds that GPU alone while the others keep working. `VerifierSlots` lends a
verifier to a task (a problem to verify or convert), at most `per_verifier` tasks per GPU at once,
the next free one first: a slow problem on one GPU does not hold back the others.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
from typing import Iterator


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (or their indices)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def lock_id(gpus: str | None) -> str:
    """The GPU a verifier's workers use (the first they see), as this process names it: the name
    of its timing and memory locks."""
    first = (gpus or os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
    return re.sub(r"[^A-Za-z0-9-]", "_", first) or "0"


def choose_gpus(spec: str | None) -> list[str]:
    """`--gpus`: "all" (every visible GPU) or a comma-separated list of visible ones. Raises
    ValueError with what is visible when a named GPU is not."""
    visible = visible_gpus()
    if spec is None or spec.strip() == "all":
        if not visible:
            raise ValueError("no CUDA device is visible")
        return visible
    wanted = [g.strip() for g in spec.split(",") if g.strip()]
    unknown = [g for g in wanted if g not in visible]
    if not wanted or unknown:
        raise ValueError(f"--gpus {spec}: not visible ({', '.join(unknown) or 'none named'}); "
                         f"visible: {', '.join(visible) or 'none'}")
    return list(dict.fromkeys(wanted))


class VerifierSlots:
    """Lends verifiers to tasks: each verifier at most `per_verifier` tasks at once."""

    def __init__(self, verifiers: list, per_verifier: int):
        if not verifiers:
            raise ValueError("no verifier to lend")
        self.verifiers = list(verifiers)
        self.size = len(self.verifiers) * max(1, per_verifier)
        self._free: queue.Queue = queue.Queue()
        for _ in range(max(1, per_verifier)):  # interleaved: the first tasks go to different GPUs
            for v in self.verifiers:
                self._free.put(v)

    @contextlib.contextmanager
    def lend(self) -> Iterator:
        v = self._free.get()
        try:
            yield v
        finally:
            self._free.put(v)


class VerifierGroup:
    """Several verifiers (one per GPU) behind one verifier's interface, for one search: each
    check goes to a verifier with a free slot; the module is captured by the first. `capacity`
    is how many checks may run at once (every verifier's workers)."""

    def __init__(self, verifiers: list):
        self.slots = VerifierSlots(verifiers, verifiers[0].config.workers if verifiers else 1)
        self.verifiers = self.slots.verifiers
        self.config = self.verifiers[0].config
        self.device = self.verifiers[0].device
        self.capacity = sum(v.capacity for v in self.verifiers)

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def verify(self, problem, source: str, **kwargs):
        with self.slots.lend() as verifier:
            return verifier.verify(problem, source, **kwargs)

    def capture(self, problem, cancel=None):
        return self.verifiers[0].capture(problem, cancel=cancel)

    def warm_compile(self, problem) -> None:
        for v in self.verifiers:  # a full check may land on any of them
            v.warm_compile(problem)

    def settings(self) -> dict:
        return {**self.verifiers[0].settings(), "gpus": len(self.verifiers)}

    def close(self) -> None:
        for v in self.verifiers:
            v.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
