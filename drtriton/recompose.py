"""Operator patterns a module spells out, put back as the one vocabulary operator they compute.

Real code often writes a normalisation by hand: every Llama-style model (Llama, Mistral, Qwen,
Gemma, Phi-3) and T5 compute RMS normalisation as

    x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

Traced, that is five operators: the planner cuts them into a reduction and two pointwise
kernels (three launches and two tensors written and read again), where the `rms_norm` template
runs one kernel over each row. Inductor's pattern matcher does the same for its lowerings.

A pattern is replaced only where its inner values have no other reader (so nothing else needs
them) and the input is float32, where the template's arithmetic is the written form's (half
precision would round each written step, the fused operator only the result).
"""

from __future__ import annotations

from .capture import Graph, Node, value_refs


def recompose(graph: Graph) -> Graph:
    """`graph` with each hand-written RMS normalisation as one `rms_norm` node (in place)."""
    producer, users = graph.producer(), graph.users()
    replaced: dict[str, Node] = {}  # the output's name -> its new node
    dropped: set[str] = set()  # names of the nodes the new ones stand for
    for node in graph.nodes:
        found = _rms_norm(graph, node, producer, users)
        if found is not None and not dropped & {n.name for n in found[1]}:
            replaced[node.outputs[0]], inner = found
            dropped |= {n.name for n in inner}
    if not replaced:
        return graph
    nodes = []
    for node in graph.nodes:
        if node.name in dropped:
            for out in node.outputs:
                graph.values.pop(out, None)
        else:
            nodes.append(replaced.get(node.outputs[0], node) if len(node.outputs) == 1 else node)
    graph.nodes = nodes
    return graph


def _rms_norm(graph: Graph, node: Node, producer: dict, users: dict) -> tuple[Node, list[Node]] | None:
    """(the rms_norm node, the nodes it replaces but `node`) where `node` is
    x * rsqrt(mean(x ** 2, last dim, keepdim) + eps) or x / sqrt(...), else None."""
    if node.op not in ("mul", "div") or len(node.outputs) != 1:
        return None
    refs = value_refs(node.args)
    if len(refs) != 2:
        return None
    for x, r in ((refs[0], refs[1]), (refs[1], refs[0])) if node.op == "mul" else ((refs[0], refs[1]),):
        root = _only_reader(producer.get(r), users, "rsqrt" if node.op == "mul" else "sqrt")
        shifted = _only_reader(_input_node(root, producer), users, "add_scalar")
        mean = _only_reader(_input_node(shifted, producer), users, "mean")
        square = _only_reader(_input_node(mean, producer), users, "pow", "mul")
        if square is None:
            continue
        values = graph.values
        if not (_squares(square) and _same_tensor(_input(square), x, producer, values)):
            continue
        shape = values[x].shape
        if (values[x].dtype != "torch.float32" or not shape or None in shape or len(shape) - 1 in values[x].symbolic
                or tuple(mean.attrs.get("dim") or ()) != (len(shape) - 1,) or not mean.attrs.get("keepdim")):
            continue
        inner = [square, mean, shifted, root]
        cast = producer.get(_input(square))
        if _input(square) != x and len(users.get(_input(square), [])) == 1:
            inner.append(cast)  # the cast only the square read
        if any(out in graph.outputs for n in inner for out in n.outputs):
            continue  # the module returns a part (the variance, say): it stays computed
        eps = float(shifted.attrs["value"])
        fused = Node(name=node.name, target="aten.rms_norm.default", args=[{"value": x}, [shape[-1]], None, eps],
                     kwargs={}, outputs=list(node.outputs), op="rms_norm",
                     attrs={"normalized_dims": 1, "eps": eps, "affine": False})
        return fused, inner
    return None


def _only_reader(node: Node | None, users: dict, *ops: str) -> Node | None:
    """`node` if it is one of `ops` and its one output has one reader."""
    if node is None or node.op not in ops or len(node.outputs) != 1:
        return None
    return node if len(users.get(node.outputs[0], [])) == 1 else None


def _input(node: Node) -> str | None:
    refs = value_refs(node.args)
    return refs[0] if refs else None


def _input_node(node: Node | None, producer: dict) -> Node | None:
    return producer.get(_input(node)) if node is not None else None


def _squares(node: Node) -> bool:
    """x ** 2 or x * x."""
    if node.op == "pow":
        return node.attrs.get("exponent") in (2, 2.0)
    refs = value_refs(node.args)
    return len(refs) == 2 and refs[0] == refs[1]


def _same_tensor(a: str | None, b: str, producer: dict, values: dict) -> bool:
    """`a` is `b`, or `b` cast to the dtype it has (T5 squares `x.to(torch.float32)`, a float32 x)."""
    if a == b:
        return True
    cast = producer.get(a) if a is not None else None
    return (cast is not None and cast.op == "to_dtype" and _input(cast) == b
            and values[a].dtype == values[b].dtype)
