"""Rank-0 tensors through the operators that index along a dim (gather and scatter, index_select,
the scans): PyTorch treats a 0-d tensor there as one element along dim 0, and so does the rewritten
graph, which reads each 0-d operand through a one-element view and views each result back to 0-d.
The templates then see rank 1 and need no case of their own; the views compute nothing."""

from __future__ import annotations

from .capture import Graph, Node, Value, renamed_refs, value_refs

# vocabulary operators whose 0-d operands PyTorch reads as one element along dim 0
ALONG_A_DIM = {
    "gather", "index_select", "scatter", "index_add", "index_copy", "index_fill",
    "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp",
}


def promote_rank0(graph: Graph) -> Graph:
    """`graph` with every such operator over 0-d tensors (each operand and result of at most one
    element, one of them 0-d) computing on one-element views instead; in place."""
    nodes: list[Node] = []
    for node in graph.nodes:
        if node.op not in ALONG_A_DIM or not _over_scalars(graph, node):
            nodes.append(node)
            continue
        renamed = {}
        for v in dict.fromkeys(value_refs(node.args)):
            if not graph.values[v].shape:
                renamed[v] = _view(graph, nodes, v, [1], f"{v}_as_1")
        node.args = renamed_refs(node.args, renamed)
        outs = []
        for o in node.outputs:
            if graph.values[o].shape:
                outs.append(o)
                continue
            inner = graph.fresh_name(f"{o}_as_1")
            graph.values[inner] = Value(inner, [1], graph.values[o].dtype, "node")
            outs.append(inner)
        before, node.outputs = node.outputs, outs
        nodes.append(node)
        for o, inner in zip(before, outs):
            if o != inner:  # the result as forward reads it, under its own name
                name = o if not any(n.name == o for n in graph.nodes + nodes) else graph.fresh_name(f"{o}_view")
                nodes.append(Node(name, "aten.view.default", [{"value": inner}, []], {}, [o]))
    graph.nodes = nodes
    return graph


def _over_scalars(graph: Graph, node: Node) -> bool:
    values = [graph.values[v] for v in value_refs(node.args) + node.outputs]
    return any(not v.shape for v in values) and all(len(v.shape) <= 1 and all(s == 1 for s in v.shape) for v in values)


def _view(graph: Graph, nodes: list[Node], v: str, shape: list[int], stem: str) -> str:
    name = graph.fresh_name(stem)
    graph.values[name] = Value(name, list(shape), graph.values[v].dtype, "node")
    nodes.append(Node(name, "aten.view.default", [{"value": v}, list(shape)], {}, [name]))
    return name

