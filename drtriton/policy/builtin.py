"""The built-in policy: Triton written from templates, no model needed.

For a captured program it proposes plans: a cut into fragments (fused around anchors, or one
operator each), an emitter variant per fragment (e.g. the dot precision of a matmul), and, in
mixed mode, PyTorch for fragments no emitter handles. Each plan is assembled into a complete
drop-in module. The search verifies them; this module only writes code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..capture import Graph
from ..problem import Problem
from .emit import Emitted, Names, Unsupported
from .emit import elementwise, matmul, pytorch, rows
from .module import assemble
from .program import Fragment, Program

EMITTERS = {
    "pointwise": elementwise,
    "matmul": matmul,
    "reduction": rows,
    "softmax": rows,
    "norm": rows,
}


@dataclass
class Candidate:
    source: str
    policy: str
    plan: list[str]  # one line per fragment: what runs it
    pytorch_compute: bool  # some fragment runs as PyTorch (mixed mode only)
    notes: list[str] = field(default_factory=list)  # fragments that fell back, and why

    @property
    def description(self) -> str:
        return "; ".join(self.plan)


def _emitter(frag: Fragment):
    if frag.kind in ("view", "torch"):
        return pytorch
    return EMITTERS.get(frag.kind)


def _split(frag: Fragment) -> list[Fragment]:
    """An anchor fragment taken apart: the prologue and epilogue as pointwise fragments around
    the anchor alone (which then runs as PyTorch)."""
    parts = []
    if frag.prologue:
        parts.append(Fragment(list(frag.prologue), None, "pointwise"))
    parts.append(Fragment([frag.anchor], None, "torch"))
    if frag.epilogue:
        parts.append(Fragment(list(frag.epilogue), None, "pointwise"))
    return parts


class BuiltinPolicy:
    name = "builtin"

    def __init__(self, device: str = "cuda"):
        self.device = device

    def candidates(self, problem: Problem, graph: Graph, mode: str) -> Iterator[Candidate]:
        """Plans, most promising first: fused then unfused cuts, each emitter variant in turn."""
        seen: set[str] = set()
        program = Program(graph)
        cuts: list[list[str]] = []
        for fuse in (True, False):
            frags = program.fragments(fuse=fuse)
            labels = [f.label for f in frags]
            if labels in cuts:  # nothing to fuse: the unfused cut is the same
                continue
            cuts.append(labels)
            variants = max((len(_configs(program, f)) for f in frags), default=1)
            for v in range(variants):
                try:
                    cand = self._assemble(problem, program, frags, v, mode, fuse)
                except Unsupported:
                    continue
                if cand.source not in seen:
                    seen.add(cand.source)
                    yield cand

    def _assemble(self, problem, program, frags, variant, mode, fuse) -> Candidate:
        names = Names()
        kernels, lines, plan, notes = [], [], [], []
        pytorch_compute = False
        queue = list(frags)
        while queue:
            frag = queue.pop(0)
            try:
                emitted, how = self._emit(program, frag, variant, names)
            except Unsupported as e:
                if mode != "mixed":
                    raise
                if frag.anchor is None or len(frag.nodes) == 1:
                    emitted, how = pytorch.emit(program, Fragment(frag.nodes, None, "torch")), "PyTorch"
                    notes.append(f"{frag.label}: PyTorch ({e})")
                else:
                    queue = _split(frag) + queue
                    notes.append(f"{frag.label}: split ({e})")
                    continue
            if emitted.pytorch_compute and mode != "mixed":
                raise Unsupported(f"{frag.label} needs PyTorch")
            pytorch_compute |= emitted.pytorch_compute
            kernels += emitted.kernels
            lines += emitted.lines
            if frag.kind != "view":
                plan.append(f"{frag.label}: {how}")
        outputs = [program.expr(o) for o in program.graph.outputs]
        if not kernels:
            raise Unsupported("no fragment runs in Triton")
        cut = "fused" if fuse else "one operator per kernel"
        description = f"Plan ({cut}): " + "; ".join(plan)
        source = assemble(problem, kernels, lines, outputs, description)
        return Candidate(source, self.name, plan, pytorch_compute, notes)

    def _emit(self, program: Program, frag: Fragment, variant: int, names: Names) -> tuple[Emitted, str]:
        emitter = _emitter(frag)
        if emitter is None:
            raise Unsupported(f"no Triton template for {frag.kind}")
        if emitter is pytorch:
            return pytorch.emit(program, frag), "PyTorch" if frag.kind == "torch" else "view"
        configs = emitter.configs(program, frag)
        config = configs[min(variant, len(configs) - 1)]
        emitted = emitter.emit(program, frag, config, names, device=self.device)
        detail = ", ".join(f"{k}={v}" for k, v in config.items())
        return emitted, "Triton" + (f" ({detail})" if detail else "")


def _configs(program: Program, frag: Fragment) -> list[dict]:
    emitter = _emitter(frag)
    if emitter is None or emitter is pytorch:
        return [{}]
    return emitter.configs(program, frag)
