"""Copies that change nothing, dropped: eval-mode dropout (`F.dropout(x, training=False)`, which
export writes as `clone`), `clone()` and `alias` of a value forward computes. Each ran as a
PyTorch copy per call: Swin-T made three a block, the widest 77 MB; ViT and the MLP blocks of
timm models make them too. Inductor drops them the same way.

A copy keeps its meaning when nothing writes into either tensor afterwards and it is not
returned (the caller may change what it gets, which must not change a value forward still
holds). Only copies of computed values go: a computed value is laid out densely as its copy
would be, where a copy of a slice or of an input is contiguous where its source need not be
(a later `view` may need that), and a copy with the contiguous format may reorder."""

from __future__ import annotations

from .capture import VALUE_COPIES, VIEWS, Graph, Node, renamed_refs, value_refs, viewed, writes_in_place


def elide_copies(graph: Graph) -> Graph:
    """`graph` with each copy that changes nothing replaced by its input; in place."""
    producer = graph.producer()
    # what is returned or written in place, through any view of it, keeps its copies
    kept = viewed(graph.roots() + [value_refs(n.args)[0] for n in graph.nodes if writes_in_place(n) and n.args], producer)
    names: dict[str, str] = {}  # a dropped copy's output -> what it copied
    nodes: list[Node] = []
    for node in graph.nodes:
        if names:
            node = Node(node.name, node.target, renamed_refs(node.args, names),
                        {k: renamed_refs(v, names) for k, v in node.kwargs.items()}, node.outputs,
                        node.op, node.attrs, node.mutates)
        source = _copied(node, producer)
        if source is not None and node.outputs[0] not in kept and source not in kept:
            names[node.outputs[0]] = source
            continue
        nodes.append(node)
    graph.nodes = nodes
    return graph


def _copied(node: Node, producer: dict) -> str | None:
    """What `node` copies, where it is a copy of a computed value that keeps its layout."""
    refs = value_refs(node.args)
    if node.target not in VALUE_COPIES or len(refs) != 1 or len(node.outputs) != 1:
        return None
    if str(node.kwargs.get("memory_format")) not in ("None", "torch.preserve_format"):
        return None  # (the contiguous format may reorder a permuted value)
    made = producer.get(refs[0])
    return refs[0] if made is not None and made.target not in VIEWS else None
