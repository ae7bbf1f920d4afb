"""Run a generated program: the last gate before a program is kept.

A program can be well-formed and still compute a constant in float32 (``tanh`` of a large sum
is exactly 1.0, a KL sum that is always negative feeds a ``relu``, a product of many small
probabilities underflows). A kernel returning that constant would pass any check, so such
programs make useless, hackable problems. The generator therefore runs every candidate on two
input draws, single-threaded and seeded, and keeps it only if the output

- has the shape the solver computed and is finite on both draws,
- differs between the draws beyond ``TOL`` (atol and rtol, KernelBench's float32 tolerance):
  a kernel that replays one answer fails,
- is not within ``TOL`` of zero everywhere: a kernel that returns zeros fails.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Sequence

#: KernelBench's float32 tolerance
TOL = 1e-4


class Refused(Exception):
    """The program runs but is not a useful problem (the message says why)."""


def load(code: str, name: str = "<synth>") -> dict:
    namespace: dict = {}
    exec(compile(code, name, "exec"), namespace)  # noqa: S102 - our own generated source
    return namespace


@contextmanager
def one_thread():
    """One intra-op thread: one core per worker, and results that do not depend on the machine's
    thread count."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def run(code: str, seeds: Sequence[int] = (0, 1)):
    """Outputs of the program (module built once with seed 0) for each input seed."""
    import torch

    namespace = load(code)
    with one_thread():
        torch.manual_seed(0)
        model = namespace["Model"](*namespace["get_init_inputs"]())
        outputs = []
        with torch.no_grad():
            for seed in seeds:
                torch.manual_seed(seed)
                outputs.append(model(*namespace["get_inputs"]()))
        return outputs


def check(code: str, shape: Sequence[int]) -> None:
    import torch

    first, second = run(code, (1, 2))
    if tuple(first.shape) != tuple(shape):
        raise Refused(f"output shape {tuple(first.shape)} differs from the solved {tuple(shape)}")
    with one_thread():
        a, b = first.float(), second.float()  # argmax results are int64
        if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
            raise Refused("non-finite output")
        if torch.allclose(a, b, rtol=TOL, atol=TOL):
            raise Refused("the output does not depend on the inputs")
        if not bool((a.abs() > TOL).any()):
            raise Refused("the output is zero within tolerance")
