"""Kernel emitters: one module per kind of fragment, each turning a fragment and a launch
configuration into Triton kernel sources plus the forward lines that allocate and launch.

An emitter is a module-level object with `configs(program, fragment)` (its launch-configuration
space, best guess first) and `emit(program, fragment, config, names)` returning `Emitted`, or
None when it cannot handle this fragment (the planner then tries other cuts or PyTorch).
"""

from __future__ import annotations

from dataclasses import dataclass


class Unsupported(Exception):
    """This emitter cannot generate this fragment; the message says why."""


@dataclass
class Emitted:
    kernels: list[str]  # @triton.jit sources
    lines: list[str]  # forward lines
    pytorch_compute: bool = False  # the fragment computes in PyTorch (only mixed mode allows it)


class Names:
    """Unique kernel names within one generated module."""

    def __init__(self):
        self.used: set[str] = set()

    def kernel(self, label: str) -> str:
        base = "_".join(label.replace(",", " ").split())[:48] + "_kernel"
        name, i = base, 2
        while name in self.used:
            name, i = f"{base}{i}", i + 1
        self.used.add(name)
        return name
