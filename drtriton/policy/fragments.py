"""A fragment as a problem of its own, so candidates for it can be verified alone.

DRTriton's test-time search generates and verifies kernels per fragment (at most 5 operators),
then assembles the fastest verified ones. A fragment problem is a KernelBench-style module whose
forward takes the fragment's external tensors (inputs, parameters, intermediate values) as
arguments and runs its operators in PyTorch; `get_inputs` draws random tensors of the captured
shapes.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from .. import ops
from ..capture import LIBRARY_OPERATORS, Graph, Node, Value, renamed_refs
from ..ops.indexing import ends_source, offsets_source, segments_of
from ..problem import Problem, from_source
from .emit import pytorch
from .program import Fragment, Program


@dataclass
class FragmentTask:
    problem: Problem  # the fragment as a standalone problem
    graph: Graph  # its captured graph (the fragment's nodes, external values as inputs)
    label: str
    key: str  # the same fragment in two cuts has the same key
    inputs: list[str]  # the forward arguments, as values of the parent program
    outputs: list[str]  # what forward returns, as values of the parent program


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name).strip("_") or "t"


def _literals(args):
    """A node's arguments with its tensors left out: what it computes them with."""
    if isinstance(args, dict) and "value" in args:
        return "tensor"
    if isinstance(args, list):
        return [_literals(a) for a in args]
    return args


def _draw(v: Value, fqn: str | None) -> str:
    shape = tuple(v.shape)
    if v.dtype in ("torch.int64", "torch.int32"):
        return f"torch.randint(0, 2, {shape})"
    if v.dtype == "torch.bool":
        return f"torch.rand({shape}) > 0.5"
    if fqn and fqn.endswith("running_var"):
        return f"torch.rand({shape}) + 0.5"  # a variance
    return f"torch.randn({shape})"


def _bound_draws(program: Program, nodes: list[Node]) -> dict[str, str]:
    """Draws for the bounds among `nodes`' inputs that random integers would make invalid: a
    segment reduction's (sorted offsets over the element count, or lengths summing to it) and the
    group ends of a slot in the `ends` domain (sorted, each up to the rows of the slot it groups)."""
    draws = {}
    for n in nodes:
        if n.op == "segment_reduce":
            seg = segments_of(n)
            count = (program.values[seg.indices].shape[0] if seg.indices
                     else program.values[seg.data].shape[n.attrs["axis"]])
            shape = program.values[seg.bounds].shape
            draws[seg.bounds] = offsets_source(count, shape, end=n.attrs["offsets_end"], lengths=seg.lengths is not None)
        elif n.op is not None:
            ins = program.inputs_of(n)
            for slot, v in zip(ops.get(n.op).slots, ins):
                if slot.domain == "ends":
                    src, axis = slot.index_of
                    draws[v] = ends_source(program.values[ins[src]].shape[axis], program.values[v].shape)
    return draws


def _library_imports(nodes: list[Node]) -> list[str]:
    """Imports that register the other libraries' operators among `nodes` (capture.LIBRARY_OPERATORS):
    a fragment's problem runs in a process that has not loaded them."""
    modules = {LIBRARY_OPERATORS[n.target] for n in nodes if n.target in LIBRARY_OPERATORS}
    return [f"import {m}  # registers {', '.join(sorted(t for t, mm in LIBRARY_OPERATORS.items() if mm == m))}"
            for m in sorted(modules)]


def fragment_task(program: Program, frag: Fragment, parent: Problem) -> FragmentTask:
    inside = {n.name for n in frag.nodes}
    # the index arithmetic it recomputes is part of it (its kernels compute it, so must the problem)
    members = program.recomputed_for(frag.nodes) + frag.nodes
    produced = {o for n in members for o in n.outputs}
    externals: list[str] = []
    for n in members:
        for v in program.inputs_of(n):
            if v not in produced and v not in externals and program.is_tensor(v):
                externals.append(v)
    names = {v: _identifier(program.values[v].fqn or v) for v in externals}
    values: dict[str, Value] = {}
    for i, v in enumerate(externals):
        old = program.values[v]
        values[names[v]] = Value(names[v], list(old.shape), old.dtype, "input", index=i, symbolic=list(old.symbolic))
    nodes: list[Node] = []
    for n in members:
        copied = copy.deepcopy(n)
        copied.args = renamed_refs(n.args, names)
        copied.kwargs = {k: renamed_refs(a, names) for k, a in n.kwargs.items()}
        nodes.append(copied)
        for o in n.outputs:
            if o in program.values:
                values[o] = program.values[o]
    for n in members:  # scalar constants the nodes read; sizes forward computed, as their values
        for v in program.inputs_of(n):
            if v not in produced and v not in externals:
                old = program.values[v]
                values[v] = Value(v, [], old.dtype, "const", literal=old.literal) if old.kind == "node" else old
    outputs = [o for n in frag.nodes for o in n.outputs[:1] if program.used_outside(o, inside)]
    graph = Graph(values, nodes, [names[v] for v in externals], outputs)

    sub = Program(graph)
    body = pytorch.emit(sub, Fragment(nodes, None, "torch")).lines
    ret = ", ".join(sub.expr(o) for o in outputs)
    args = ", ".join(["self"] + [names[v] for v in externals])
    special = _bound_draws(program, members)
    draws = ", ".join(special.get(v) or _draw(program.values[v], program.values[v].fqn) for v in externals)
    source = "\n".join([
        "import torch",
        "import torch.nn as nn",
        *_library_imports(members),
        "",
        "",
        "class Model(nn.Module):",
        f'    """{frag.label} (a fragment of {parent.name})"""',
        "",
        f"    def forward({args}):",
        *(f"        {line}" for line in body),
        f"        return {ret}",
        "",
        "",
        "def get_inputs():",
        f"    return [{draws}]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ])
    # (a recomputed arange's start and length are arguments, not attributes)
    recomputed = {n.name for n in members} - inside
    key = "|".join(f"{n.target}:{sorted(n.attrs.items())!r}" + (f":{_literals(n.args)!r}" if n.name in recomputed else "")
                   for n in members) + "|" + \
          ",".join(str(program.values[v].shape) for v in externals)
    problem = from_source(source, "Model", name=f"{parent.name}: {frag.label}", origin=parent.origin)
    return FragmentTask(problem, graph, frag.label, key, externals, outputs)
