"""Canonical form of a program, for removing duplicates.

Two programs are the same when they compute the same DAG: same operators with the same
attributes and sizes, wired the same way, up to the order in which independent operators were
written, the naming of inputs, and the operand order of commutative operators. The form is a
depth-first serialisation from the output: operands in slot order (commutative operands sorted
by a structural hash that ignores input identity), inputs numbered by first visit, shared nodes
written once and referred to afterwards.
"""

from __future__ import annotations

import hashlib

from drtriton.training.synth.solve import Solution
from drtriton.training.synth.structure import Graph, Use


def _attrs_text(attrs: dict) -> str:
    return repr(sorted((k, v) for k, v in attrs.items() if k != "groups_mode"))


def canonical_form(graph: Graph, solution: Solution) -> str:
    producers = {node.output: node for node in graph.ops}
    shallow: dict[int, str] = {}

    def structure(tid: int) -> str:
        """Hash of the sub-DAG below a tensor, blind to which input is which."""
        if tid not in shallow:
            node = producers.get(tid)
            if node is None:
                tensor = graph.tensors[tid]
                text = f"in:{tensor.domain}:{solution.shapes[tid]}"
            else:
                parts = [f"{_use_text(u)}{structure(u.tensor)}" for u in node.uses]
                if node.op.commutative:
                    parts.sort()
                text = f"{node.name}{_attrs_text(solution.attrs[node.index])}({','.join(parts)})"
            shallow[tid] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return shallow[tid]

    labels: dict[int, str] = {}
    out: list[str] = []

    def visit(tid: int) -> str:
        if tid in labels:
            return labels[tid]
        node = producers.get(tid)
        if node is None:
            labels[tid] = f"i{sum(1 for v in labels.values() if v.startswith('i'))}"
            out.append(f"{labels[tid]}={graph.tensors[tid].domain}{solution.shapes[tid]}")
            return labels[tid]
        uses = list(node.uses)
        if node.op.commutative:
            uses.sort(key=lambda u: _use_text(u) + structure(u.tensor))
        args = [_use_text(u) + visit(u.tensor) for u in uses]
        labels[tid] = f"n{sum(1 for v in labels.values() if v.startswith('n'))}"
        out.append(f"{labels[tid]}={node.name}{_attrs_text(solution.attrs[node.index])}({','.join(args)})")
        return labels[tid]

    visit(graph.output)
    return ";".join(out)


def _use_text(use: Use) -> str:
    glue = f"i{use.into}" if use.into else ""
    return f"[f{use.flatten}u{use.unsqueeze}c{int(use.cast)}{glue}]" if use.adapted or use.cast or use.into else ""


def canonical_key(graph: Graph, solution: Solution) -> str:
    return hashlib.sha256(canonical_form(graph, solution).encode()).hexdigest()
