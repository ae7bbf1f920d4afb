"""The built-in policy: Triton written from templates, no model needed.

For a captured program it offers cuts into fragments (fused around anchors, or one operator
each) and, per fragment, emitter variants (e.g. the dot precision of a matmul; block sizes are
left to Triton's autotuner on the GPU). `assemble` turns a cut plus a choice per fragment into a
complete drop-in module; in mixed mode a fragment with no Triton choice runs as PyTorch. The
search verifies; this module only writes code.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from ..capture import Graph
from ..errors import describe_exception
from ..ops.linalg import ATTENTION
from ..problem import Problem
from .compose import Foreign, embed
from .emit import Emitted, Names, Unsupported, bound_tuning, sizes_follow_data
from .emit import (attention, batchnorm, conv, copies, elementwise, factorization, gather, grouped, loss, matmul, norms,
                   pool, pytorch, recurrent, rows, scan, scatter, segment, sort)
from . import per_shape
from .module import assemble
from .program import MAX_FRAGMENT_OPS, Fragment, Program


class _ByOp:
    """An emitter for a kind whose anchors need different templates: routes by anchor op."""

    def __init__(self, default, **by_op):
        self.default, self.by_op = default, by_op

    def _pick(self, frag: Fragment):
        return self.by_op.get(frag.anchor.op if frag.anchor is not None else None, self.default)

    def configs(self, program: Program, frag: Fragment) -> list[dict]:
        return self._pick(frag).configs(program, frag)

    def emit(self, program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
        return self._pick(frag).emit(program, frag, config, names, device=device)


EMITTERS = {
    "pointwise": elementwise,
    "matmul": _ByOp(matmul, grouped_mm=grouped, **dict.fromkeys(ATTENTION, attention)),
    "reduction": rows,
    "softmax": rows,
    "norm": _ByOp(norms, batch_norm=batchnorm),
    "conv": conv,
    "pool": pool,
    "scan": scan,
    "sort": sort,  # order statistics: a row sort per program
    "loss": loss,
    # the store side and segment reductions: templates of their own
    "indexing": _ByOp(gather, scatter=scatter, index_put=scatter, segment_reduce=segment),
    "recurrent": recurrent,  # LSTM, GRU, RNN: the sequence walked inside one kernel
    "factorization": factorization,  # LU, Cholesky, triangular solves: a matrix per program
}

PYTORCH = None  # the choice "run this fragment as PyTorch"
# The choice "the anchor by PyTorch (cuBLAS/cuDNN), its prologue and epilogue fused in Triton"
# (mixed mode): fp32 without tf32 leaves Triton's dot to FMA or to 3 tf32 passes, and the
# vendor libraries' fp32 GEMMs and convolutions win (docs/benchmarks.md).
LIBRARY = "library"
LIBRARY_KINDS = ("matmul", "conv")


def first_choices(frags: list[Fragment], options: dict[int, list]) -> dict[int, object]:
    """The plan as first written: each fragment's first choice (PYTORCH when it has none), unless
    that leaves nothing in Triton (a lone convolution in mixed mode on the GPU, where LIBRARY
    leads; with a prologue or epilogue, LIBRARY runs those in Triton): then each fragment's
    first Triton template instead."""
    first = {i: (o[0] if o else PYTORCH) for i, o in options.items()}

    def triton(i: int) -> bool:
        c = first[i]
        return c is not PYTORCH and (c != LIBRARY or bool(frags[i].prologue or frags[i].epilogue))

    if not any(triton(i) for i in first):
        first = {i: next((c for c in o if c != LIBRARY), first[i]) for i, o in options.items()}
    return first


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


def _embedded(program: Program, foreign: Foreign, names: Names) -> Emitted:
    """A fragment module from another policy, prefixed and called from forward."""
    prefix = "_" + names.kernel(f"f{len(names.used)}").removesuffix("_kernel") + "_"
    code, instance = embed(foreign, prefix)
    outs = ", ".join(program.expr(o) for o in foreign.outputs) + ("," if len(foreign.outputs) > 1 else "")
    call = f"{outs} = {instance}({', '.join(program.expr(v) for v in foreign.inputs)})"
    return Emitted([code], [f"# {foreign.policy} policy's fragment", call])


def _checks(program: Program) -> list[str]:
    """Forward's last lines: each checked condition (`Check`) read back, raising where it fails
    (after every launch, so the wait is once, at the end)."""
    return [f"if not bool({program.expr(c.value)}): raise RuntimeError({c.message!r})"
            for c in program.graph.checks]


def _split(frag: Fragment) -> list[Fragment]:
    """An anchor fragment taken apart, in order: the prologue and epilogue as pointwise
    fragments, the anchor (with the nodes folded in next to it: flips, broadcasts) as PyTorch."""
    parts: list[Fragment] = []
    for node in frag.nodes:
        kind = "pointwise" if node in frag.prologue or node in frag.epilogue else "torch"
        if parts and parts[-1].kind == kind:
            parts[-1].nodes.append(node)
        else:
            parts.append(Fragment([node], None, kind))
    return parts


def _chains(program: Program, first: Fragment, then: Fragment) -> bool:
    """`then` (pointwise) can run in one kernel with `first` (pointwise, just before it): it
    reads what `first` computes, over the same shape, and the two fit in one fragment."""
    if then.kind != "pointwise" or len(first.nodes) + len(then.nodes) > MAX_FRAGMENT_OPS:
        return False
    if program.gathers_inside(then.nodes, first.nodes + then.nodes):
        return False  # (it reads a tensor `first` writes at computed positions)
    last = first.nodes[-1].outputs[0]
    made = {o for n in first.nodes for o in n.outputs}
    reads_first = any(v in made for v in program.inputs_of(then.nodes[0]))
    return reads_first and all(program.same_shape(n.outputs[0], last) for n in then.nodes)


def size_guards(graph) -> list[str]:
    """Forward's first lines where inputs were traced with one symbolic size (x's batch and that
    of a (1, C) bias, both traced at 1; or two inputs added elementwise): the kernels index them
    as equal, so a call where they are not (a broadcast the trace did not see) raises a clear
    error instead of reading out of bounds."""
    first: dict[str, tuple[str, int]] = {}
    lines = []
    for name in graph.inputs:
        value = graph.values[name]
        for dim, symbol in zip(value.symbolic, value.symbols):
            if symbol not in first:
                first[symbol] = (name, dim)
                continue
            other, other_dim = first[symbol]
            lines += [f"if {name}.shape[{dim}] != {other}.shape[{other_dim}]:",
                      f"    raise ValueError(f\"{name}.shape[{dim}] is {{{name}.shape[{dim}]}}, {other}.shape[{other_dim}] "
                      f"is {{{other}.shape[{other_dim}]}}: this module was converted with them equal "
                      f"(convert it again with inputs shaped as you call it)\")"]
    return lines


class BuiltinPolicy:
    name = "builtin"

    def __init__(self, device: str = "cuda", direct_launch: bool = True):
        self.device = device
        self.direct_launch = direct_launch  # modules launch through _DirectLaunch (policy/launch.py)

    # -- the search's view -------------------------------------------------------------------
    def cuts(self, program: Program) -> list[list[Fragment]]:
        """Fused first, then one operator per fragment (when that differs)."""
        out, seen = [], []
        for fuse in (True, False):
            frags = program.fragments(fuse=fuse)
            if fuse:  # flips along a scanned axis, broadcasts before a loss: folded into the anchor
                frags = loss.absorb_broadcasts(program, scan.absorb_flips(program, frags))
            labels = [f.label for f in frags]
            if labels not in seen:
                seen.append(labels)
                out.append(frags)
        return out

    def choices(self, program: Program, frag: Fragment, mode: str) -> list:
        """A fragment's variants, the most promising first: emitter configurations (indices)
        and, in mixed mode, LIBRARY for a matmul or convolution. The GPU order follows
        benchmarks/plan_variants.py on an H100 (docs/benchmarks.md): a dot as 3 tf32 passes
        beats fp32 FMA and cuBLAS's fp32 GEMM; cuDNN beats the implicit-GEMM convolutions (not
        the direct depthwise ones)."""
        emitter = _emitter(frag)
        try:
            configs = [] if emitter is None or emitter is pytorch else emitter.configs(program, frag)
        except Exception:  # a template that cannot size this fragment offers no variant
            configs = []
        triton = list(range(len(configs)))
        if self.device == "cuda":  # FMAs first where a side is one (bandwidth-bound), then tf32x3
            triton.sort(key=lambda v: (not configs[v].get("fma"), configs[v].get("precision") != "tf32x3"))
        if mode != "mixed" or frag.kind not in LIBRARY_KINDS:
            return triton
        if self.device != "cuda":
            return triton + [LIBRARY]
        gemm = frag.kind == "matmul" and frag.anchor.op not in ATTENTION
        template_first = gemm or (frag.kind == "conv" and conv.is_direct(program, frag))
        return triton[:1] + [LIBRARY] + triton[1:] if template_first else [LIBRARY] + triton

    def assemble(self, problem: Problem, program: Program, frags: list[Fragment],
                 choose: Callable[[int, Fragment], "int | Foreign | None"], mode: str, cut: str = "") -> Candidate:
        """A complete module: fragment i runs emitter variant `choose(i, frag)`, another policy's
        module (a `Foreign`), or PyTorch for PYTORCH (mixed mode). Raises Unsupported when the
        plan cannot be built in this mode."""
        names = Names()
        kernels, plan, notes = [], [], []
        blocks: list[tuple[list[str], bool]] = []  # each fragment's forward lines; computed once per shape?
        shaped = per_shape.shape_only(program)
        policies: set[str] = set()
        pytorch_compute = False
        # nothing but views, copies and allocations: the copies and fills run in Triton
        materialised = {id(frags[i]) for i in copies.materialised(program, frags)}
        queue = [(i, f, None) for i, f in enumerate(frags)]  # (index, fragment, its part's variant)
        while queue:
            i, frag, part_variant = queue.pop(0)
            if frag.kind in ("view", "torch"):
                variant = PYTORCH
            else:
                variant = choose(i, frag) if part_variant is None else part_variant
            if variant == LIBRARY:
                parts = _split(frag)
                # without its anchor the epilogue has room: pointwise fragments right after it
                # join it (one pass over the library's output instead of two)
                while (queue and parts[-1].kind == "pointwise" and queue[0][2] is None
                       and _chains(program, parts[-1], queue[0][1]) and choose(queue[0][0], queue[0][1]) == 0):
                    parts[-1] = Fragment(parts[-1].nodes + queue.pop(0)[1].nodes, None, "pointwise")
                queue = [(i, f, 0) for f in parts] + queue
                # and an anchor reading the epilogue's result elementwise (a norm, a reduction)
                # takes it as its prologue, with the variant chosen for it
                if len(queue) > len(parts) and queue[len(parts)][2] is None:
                    j, then, _ = queue[len(parts)]
                    then_variant = choose(j, then)
                    if isinstance(then_variant, int) and program.can_prologue(parts[-1], then):
                        merged = Fragment(parts[-1].nodes + then.nodes, then.anchor, then.kind,
                                          prologue=parts[-1].nodes, epilogue=then.epilogue)
                        queue[len(parts) - 1:len(parts) + 1] = [(j, merged, then_variant)]
                continue
            try:
                if variant is PYTORCH and frag.kind not in ("view", "torch"):
                    raise Unsupported("no verified Triton variant")
                if id(frag) in materialised:
                    emitted, how = copies.emit(program, frag, names), "Triton"
                    policies.add(self.name)
                elif isinstance(variant, Foreign):
                    emitted, how = _embedded(program, variant, names), f"Triton by the {variant.policy} policy"
                    policies.add(variant.policy)
                else:
                    emitted, how = self._emit(program, frag, variant or 0, names)
                    if frag.kind not in ("view", "torch"):
                        policies.add(self.name)
            except Unsupported as e:
                if mode != "mixed":
                    raise
                if frag.anchor is not None and len(frag.nodes) > 1:
                    queue = [(i, f, variant) for f in _split(frag)] + queue
                    notes.append(f"{frag.label}: split ({e})")
                    continue
                emitted, how = pytorch.emit(program, Fragment(frag.nodes, None, "torch")), "PyTorch"
                notes.append(f"{frag.label}: PyTorch ({e})")
            if emitted.pytorch_compute and mode != "mixed":
                raise Unsupported(f"{frag.label} needs PyTorch in strict mode")
            pytorch_compute |= emitted.pytorch_compute
            kernels += emitted.kernels
            once = not isinstance(variant, Foreign) and per_shape.hoisted(program, frag, shaped)
            blocks.append((emitted.lines, once))
            if frag.kind != "view" or id(frag) in materialised:
                plan.append(f"{frag.label}: {how}{', once per input shape' if once else ''}")
        if not kernels:
            left = "; ".join(line for line in plan if line.endswith(": PyTorch"))
            raise Unsupported(f"no fragment runs in Triton ({left or 'views only'})")
        lines = size_guards(program.graph) + per_shape.forward_lines(program, blocks, shaped, _checks(program))
        outputs = [program.expr(o) for o in program.graph.outputs]
        description = f"Plan{f' ({cut})' if cut else ''}: " + "; ".join(plan)
        if program.rewrites:
            description += ". Rewritten first: " + "; ".join(program.rewrites)
        source = assemble(problem, kernels, lines, outputs, description, direct_launch=self.direct_launch)
        return Candidate(source, "+".join(sorted(policies)) or self.name, plan, pytorch_compute, notes)

    # -- a simple sweep, for callers that want whole modules directly -------------------------
    def candidates(self, problem: Problem, graph: Graph, mode: str) -> Iterator[Candidate]:
        """Whole modules, most promising first: each cut, with every fragment at variant v."""
        program = Program(graph)
        seen: set[str] = set()
        for frags, cut in zip(self.cuts(program), ("fused", "one operator per kernel")):
            options = [self.choices(program, f, mode) or [0] for f in frags]
            for v in range(max(len(o) for o in options)):
                try:
                    cand = self.assemble(problem, program, frags, lambda i, f, v=v: options[i][min(v, len(options[i]) - 1)],
                                         mode, cut)
                except Unsupported:
                    continue
                if cand.source not in seen:
                    seen.add(cand.source)
                    yield cand

    def _emit(self, program: Program, frag: Fragment, variant: int, names: Names) -> tuple[Emitted, str]:
        emitter = _emitter(frag)
        if emitter is None:
            raise Unsupported(f"no Triton template for {frag.kind}")
        if emitter is pytorch:
            return pytorch.emit(program, frag), "PyTorch" if frag.kind == "torch" else "view"
        try:
            configs = emitter.configs(program, frag)
            config = configs[min(variant, len(configs) - 1)]
            emitted = emitter.emit(program, frag, config, names, device=self.device)
            if sizes_follow_data(program, frag):
                # its sizes change with every call's data: tuned (keyed on them) it would tune
                # again on each call, so one configuration, the template's first choice
                emitted = replace(emitted, kernels=bound_tuning(emitted.kernels, each=1))
        except Unsupported:
            raise
        except Exception as e:  # a template's bug costs this variant, not the conversion
            raise Unsupported(f"the {frag.kind} template failed: {describe_exception(e)}") from e
        detail = ", ".join(f"{k}={v}" for k, v in config.items())
        return emitted, "Triton" + (f" ({detail})" if detail else "")
