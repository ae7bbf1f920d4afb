"""Views with a tuple result as one view per part: `chunk`, `split`, `split_with_sizes`,
`tensor_split` and `unbind` become a `slice` (or, for `unbind`, a `select`) for each part read,
as Inductor lowers them. A part is then a view like any other: the kernel reading it reads its
tensor through the strides at the part's offset (`policy/recompute.py`), where a tuple's part
was copied contiguous before each kernel read it (a gated unit's `a, b = x.chunk(2, -1)`:
two copies of half the projection each call)."""

from __future__ import annotations

from .capture import Graph, Node

#: tuple views, and the position of the argument giving their dim (0 when not given)
_DIM_AT = {"aten.chunk.default": 2, "aten.split.Tensor": 2, "aten.split_with_sizes.default": 2,
           "aten.tensor_split.sections": 2, "aten.tensor_split.indices": 2, "aten.unbind.int": 1}


def split_parts(graph: Graph) -> Graph:
    """`graph` with each tuple view along a dim of fixed size as one view per part read (or
    returned); in place."""
    read = set(graph.users()) | set(graph.roots())
    nodes: list[Node] = []
    added: set[str] = set()  # the new nodes' names (not in the graph until the end)
    for node in graph.nodes:
        parts = _parts(graph, node)
        if parts is None:
            nodes.append(node)
            continue
        x, dim, bounds = parts
        for i, (out, (start, end)) in enumerate(zip(node.outputs, bounds)):
            if out not in read:
                continue  # (a part nobody reads: no view in forward)
            name = graph.fresh_name(f"{node.name}_{i}", added)
            added.add(name)
            if node.target == "aten.unbind.int":
                nodes.append(Node(name, "aten.select.int", [{"value": x}, dim, start], {}, [out]))
            else:
                nodes.append(Node(name, "aten.slice.Tensor", [{"value": x}, dim, start, end], {}, [out]))
    graph.nodes = nodes
    return graph


def _parts(graph: Graph, node: Node) -> tuple[str, int, list[tuple[int, int]]] | None:
    """(tensor, dim, each part's [start, end) along dim) of a tuple view along a dim whose size
    capture fixed, or None."""
    at = _DIM_AT.get(node.target)
    if at is None or not node.args or not isinstance(node.args[0], dict) or "value" not in node.args[0]:
        return None
    x = graph.values.get(node.args[0]["value"])
    dim = node.args[at] if len(node.args) > at else node.kwargs.get("dim", 0)
    if x is None or not isinstance(dim, int) or not x.shape or any(o not in graph.values for o in node.outputs):
        return None
    dim %= len(x.shape)
    if dim in x.symbolic or not isinstance(x.shape[dim], int):
        return None
    unbind = node.target == "aten.unbind.int"
    sizes = [1 if unbind else graph.values[o].shape[dim] for o in node.outputs]
    if any(not isinstance(s, int) for s in sizes) or sum(sizes) != x.shape[dim]:
        return None
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    return x.name, dim, bounds
