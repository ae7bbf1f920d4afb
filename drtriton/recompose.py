"""Operator patterns a module spells out, put back as the one vocabulary operator they compute.

Real code often writes an operator by hand. Every Llama-style model (Llama, Mistral, Qwen,
Gemma, Phi-3) and T5 compute RMS normalisation as

    x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

and transformers' eager attention (and BERT's, ViT's, T5's, CLIP's) as

    w = torch.matmul(q, k.transpose(-2, -1)) * scale        # or / sqrt(d), or no scale
    w = w + mask                                             # optional: causal, padding, bias
    w = softmax(w, dim=-1); w = dropout(w)                   # dropout: a copy in eval
    out = torch.matmul(w, v)

Traced, the first is five operators (three launches, two tensors written and read again), the
second four or five launches and two L x S score tensors; `rms_norm` is one kernel over each
row, `scaled_dot_product_attention` / `masked_attention` one flash-attention kernel. Inductor's
pattern matcher does the same for its lowerings. Key and value heads repeated for grouped-query
attention (`repeat_kv`: unsqueeze, expand, copy, reshape) are read in place instead
(`enable_gqa`), in traced and recomposed attention alike: the copy disappears.

A pattern is replaced only where its inner values have no other reader (so nothing else needs
them) and is float32, where the fused arithmetic matches the written one (half precision would
round each written step, the fused operator only the result).
"""

from __future__ import annotations

import warnings

from .capture import VALUE_COPIES, VIEWS, Graph, Node, value_refs
from .errors import describe_exception
from .ops.linalg import ATTENTION

#: what eval mode leaves between the softmax and the product: dropout is a copy (or an alias)
_RESHAPES = ("aten._unsafe_view.default", "aten.view.default", "aten.reshape.default")
#: what a rewrite may leave unread and `_without_unread` removes: views, copies and size reads
#: (never a random op, whose removal would shift the generator's stream)
_UNREAD_REMOVABLE = VIEWS | {"aten.sym_size.int"}


def recompose(graph: Graph) -> Graph:
    """`graph` with hand-written RMS normalisations and attentions as one node each, and
    repeated key/value heads read in place (in place). A matcher's error costs the fusion, never
    the conversion: the graph stays as it was (nothing changes before the end), with a warning."""
    try:
        return _recompose(graph)
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"drtriton: operator patterns left as written ({describe_exception(e)})", stacklevel=2)
        return graph


def _recompose(graph: Graph) -> Graph:
    producer, users = graph.producer(), graph.users()
    replaced: dict[str, Node] = {}  # the name of the node a new one takes the place of -> it
    dropped: set[str] = set()  # names of the nodes the new ones stand for
    for node in graph.nodes:
        for find in (_rms_norm, _attention):
            found = find(graph, node, producer, users)
            if found is None:
                continue
            fused, inner = found
            # patterns that overlap (attention nested in attention) or read what another one
            # removed: the first found wins, the other stays as written
            touched = {n.name for n in inner} | {node.name}
            read = {producer[v].name for v in value_refs(fused.args) if v in producer}
            if not (touched | read) & (dropped | replaced.keys()):
                replaced[node.name] = fused
                dropped |= {n.name for n in inner}
                break
    nodes = [replaced.get(n.name, n) for n in graph.nodes if n.name not in dropped]
    nodes = [_grouped(n, graph, producer) if n.op in ATTENTION else n for n in nodes]
    nodes = _heads_last(nodes, graph)
    if all(a is b for a, b in zip(nodes, graph.nodes)) and len(nodes) == len(graph.nodes):
        return graph  # nothing found
    nodes = _without_unread(nodes, graph.roots())
    _check_defined(nodes, graph)
    kept = {out for n in nodes for out in n.outputs}
    for n in graph.nodes:
        for out in n.outputs:
            if out not in kept:
                graph.values.pop(out, None)
    graph.nodes = nodes
    return graph


def _heads_last(nodes: list[Node], graph: Graph) -> list[Node]:
    """`nodes` with each attention whose (B, H, L, Dv) result is only read to be laid out as
    (B, L, H, Dv) (`out.transpose(1, 2).contiguous()`, or the copy a `reshape` to (B, L, H * Dv)
    makes, as every multi-head block merges its heads) computing that layout itself
    (`heads_last`): its kernel stores each head's rows where they go, and the copy is gone."""
    users: dict[str, list[Node]] = {}
    for n in nodes:
        for v in value_refs(n.args) + value_refs(list(n.kwargs.values())):
            users.setdefault(v, []).append(n)
    roots, out, dropped = set(graph.roots()), [], set()
    for n in nodes:
        if n.op in ATTENTION and len(n.outputs) == 1 and n.outputs[0] not in roots and \
                len(graph.values[n.outputs[0]].shape) == 4:
            t = _only_user(users, n.outputs[0])
            c = _only_user(users, t.outputs[0]) if t is not None and _swaps_heads(t) and \
                t.outputs[0] not in roots else None
            if c is not None and (c.target == "aten.contiguous.default" or (
                    c.target == "aten.clone.default" and str(c.kwargs.get("memory_format")) == "torch.contiguous_format")):
                n = Node(name=n.name, target=n.target, args=n.args, kwargs=n.kwargs, outputs=list(c.outputs),
                         op=n.op, attrs={**n.attrs, "heads_last": True})
                dropped |= {t.name, c.name}
        out.append(n)
    return [n for n in out if n.name not in dropped]


def _only_user(users: dict, value: str) -> Node | None:
    found = users.get(value, [])
    return found[0] if len(found) == 1 and len(found[0].outputs) == 1 else None


def _swaps_heads(node: Node) -> bool:
    """A transpose of dims 1 and 2 of a 4-d tensor (`transpose(1, 2)`, `permute(0, 2, 1, 3)`)."""
    if node.target == "aten.transpose.int" and len(node.args) >= 3:
        return {node.args[1] % 4, node.args[2] % 4} == {1, 2}
    return node.target == "aten.permute.default" and [d % 4 for d in node.args[1]] == [0, 2, 1, 3]


def _without_unread(nodes: list[Node], outputs: list[str]) -> list[Node]:
    """`nodes` less the views and copies nothing reads any more (a transposed key or a repeated
    one the new nodes read in place), transitively."""
    while True:
        read = set(outputs) | {v for n in nodes for v in value_refs(n.args) + value_refs(list(n.kwargs.values()))}
        unread = [n for n in nodes if n.target in _UNREAD_REMOVABLE and not n.mutates and not read & set(n.outputs)]
        if not unread:
            return nodes
        nodes = [n for n in nodes if n not in unread]


def _check_defined(nodes: list[Node], graph: Graph) -> None:
    """Raise (so the graph stays as written) if a node would read a value nothing defines
    before it."""
    defined = set(graph.inputs) | {k for k, v in graph.values.items() if v.kind != "node"}
    for n in nodes:
        missing = [v for v in value_refs(n.args) + value_refs(list(n.kwargs.values())) if v not in defined]
        if missing:
            raise ValueError(f"{n.name} would read {missing[0]}, which the rewrite removed")
        defined |= set(n.outputs)
    if not set(graph.roots()) <= defined:
        raise ValueError("an output the rewrite removed")


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
        roots = graph.roots()
        if any(out in roots for n in inner for out in n.outputs):
            continue  # the module returns a part (the variance, say): it stays computed
        eps = float(shifted.attrs["value"])
        fused = Node(name=node.name, target="aten.rms_norm.default", args=[{"value": x}, [shape[-1]], None, eps],
                     kwargs={}, outputs=list(node.outputs), op="rms_norm",
                     attrs={"normalized_dims": 1, "eps": eps, "affine": False})
        return fused, inner
    return None


def _attention(graph: Graph, node: Node, producer: dict, users: dict) -> tuple[Node, list[Node]] | None:
    """(the attention node, the nodes it replaces but `node`) where `node` is
    matmul(softmax(matmul(q, k^T) [* c | / c] [+ mask], -1) [copies], v), else None.

    The node is a plain softmax's: a row whose mask is all -inf gives NaN as the written softmax
    does (where F.scaled_dot_product_attention's safe softmax gives zeros: `zero_empty_rows`)."""
    if node.op != "matmul" or node.attrs.get("transpose_b") or len(node.outputs) != 1:
        return None
    refs = value_refs(node.args)
    if len(refs) != 2:
        return None
    weights, v = refs
    inner: list[Node] = []
    probs = producer.get(weights)
    while probs is not None and _only_reader(probs, users, None, "to_dtype") and _passes_through(probs, graph.values):
        inner.append(probs)
        probs = producer.get(_input(probs))
    softmax = _only_reader(probs, users, "softmax")
    if softmax is None or softmax.attrs.get("dim") not in (len(graph.values[softmax.outputs[0]].shape) - 1, -1):
        return None
    inner.append(softmax)
    logits = _input(softmax)
    added = _only_reader(producer.get(logits), users, "add")
    # scores + mask, in either order, or the scores alone
    readings = [(t, m, [added]) for t, m in _both_orders(value_refs(added.args))] if added else []
    for scores, mask, more in readings + [(logits, None, [])]:
        found = _scores(scores, graph, producer, users)
        if found is None:
            continue
        q, k, scale, chain = found
        if mask == scores or not _attention_shapes(graph.values, q, k, v, mask, node.outputs[0]):
            continue
        parts = inner + more + chain
        roots = graph.roots()
        if any(out in roots for n in parts for out in n.outputs):
            return None  # the module returns a part (the weights, say): they stay computed
        operands = [{"value": q}, {"value": k}, {"value": v}, {"value": mask} if mask else None, 0.0, False]
        fused = Node(name=node.name, target="aten.scaled_dot_product_attention.default", args=operands,
                     kwargs={"scale": scale}, outputs=list(node.outputs),
                     op="masked_attention" if mask else "scaled_dot_product_attention",
                     attrs={"scale": scale} if mask else {"scale": scale, "is_causal": False})
        return fused, parts
    return None


def _both_orders(terms: list[str]) -> list[tuple[str, str]]:
    return [(terms[0], terms[1]), (terms[1], terms[0])] if len(terms) == 2 else []


def _scores(name: str, graph: Graph, producer: dict, users: dict) -> tuple[str, str, float, list[Node]] | None:
    """(q, k, scale, the nodes) where `name` is matmul(q, k^T), times or divided by a constant,
    q perhaps scaled by one too."""
    scale, chain = 1.0, []
    scaled = _only_reader(producer.get(name), users, "mul_scalar", "div_scalar")
    if scaled is not None:
        scale = _factor(scaled)
        chain.append(scaled)
        name = _input(scaled)
    product = _only_reader(producer.get(name), users, "matmul")
    if product is None or len(value_refs(product.args)) != 2:
        return None
    q, kt = value_refs(product.args)
    k = kt if product.attrs.get("transpose_b") else _untransposed(producer.get(kt), graph.values)
    if k is None:
        return None
    chain.append(product)
    # a query scaled before the product (Swin's and many hand-written blocks' `q * d ** -0.5`):
    # the product's scale, with no pass over the query of its own
    scaled = _only_reader(producer.get(q), users, "mul_scalar", "div_scalar") if q != k else None
    if scaled is not None:
        scale *= _factor(scaled)
        chain.append(scaled)
        q = _input(scaled)
    return q, k, scale, chain


def _factor(scaled: Node) -> float:
    """What a `mul_scalar` or `div_scalar` node multiplies by."""
    c = float(scaled.attrs["value"])
    return c if scaled.op == "mul_scalar" else 1.0 / c


def _passes_through(node: Node, values: dict) -> bool:
    """A copy of its input with the same values: eval-mode dropout, clone, a cast to its own dtype."""
    if node.op == "to_dtype":
        return values[_input(node)].dtype == values[node.outputs[0]].dtype
    return node.target in VALUE_COPIES and len(value_refs(node.args)) == 1


def _untransposed(node: Node | None, values: dict) -> str | None:
    """x where `node` is x with its last two dims swapped (transpose, permute, t), else None."""
    if node is None or node.op is not None or len(node.outputs) != 1:
        return None
    x = _input(node)
    rank = len(values[x].shape) if x in values else 0
    last = {rank - 2, rank - 1}
    if node.target == "aten.transpose.int" and rank >= 2:
        return x if {d % rank for d in node.args[1:3]} == last else None
    if node.target == "aten.permute.default" and rank >= 2:
        return x if [d % rank for d in node.args[1]] == list(range(rank - 2)) + [rank - 1, rank - 2] else None
    return x if node.target in ("aten.t.default", "aten.mT.default") and rank == 2 else None


def _attention_shapes(values: dict, q: str, k: str, v: str, mask: str | None, out: str) -> bool:
    """float32 query (..., L, E), key (..., S, E) and value (..., S, Ev) of one rank (2-4), the
    key's and value's batch broadcasting to the query's, which is the output's; a float32 mask
    (added: a boolean one would add 0 or 1, not hide) broadcasting to the scores without
    widening them."""
    qs, ks, vs, os = (values[t].shape for t in (q, k, v, out))
    if any(values[t].dtype != "torch.float32" for t in (q, k, v)) or not 2 <= len(qs) <= 4:
        return False
    if len(ks) != len(qs) or len(vs) != len(qs) or qs[-1] != ks[-1] or ks[-2] != vs[-2] or qs[:-1] != os[:-1]:
        return False
    if any(b not in (1, a) for t in (ks, vs) for a, b in zip(qs[:-2], t[:-2])):
        return False
    if mask is None:
        return True
    m = values[mask]
    scores = list(qs[:-1]) + [ks[-2]]
    # a symbolic (batch) dim may take other sizes: only where the scores' dim is symbolic too
    # is it known not to widen them
    free = {len(qs) - 1 - d for d in values[q].symbolic if d < len(qs) - 1}
    free |= {0} if len(ks) - 2 in values[k].symbolic else set()  # the keys (S) are the last dim
    if any(len(m.shape) - 1 - d not in free for d in m.symbolic):
        return False
    return (m.dtype == "torch.float32" and len(m.shape) <= len(scores)
            and all(d in (1, s) for d, s in zip(reversed(m.shape), reversed(scores))))


def _grouped(node: Node, graph: Graph, producer: dict) -> Node:
    """`node` (attention) reading the key and value heads in place where both are repeated
    for grouped-query attention (transformers' `repeat_kv`); else `node` itself."""
    operands = value_refs(node.args[:3])  # query, key and value, each a tensor argument
    if node.attrs.get("enable_gqa") or len(operands) < 3:
        return node
    found = [_repeated_heads(name, graph.values, producer) for name in operands[1:]]
    if None in found or found[0][1] != found[1][1]:
        return node
    (k, _), (v, _) = found
    args = list(node.args)
    args[1:3] = [{"value": k}, {"value": v}]  # the query (and a mask) may be the same tensor: kept
    return Node(name=node.name, target=node.target, args=args, kwargs={**node.kwargs, "enable_gqa": True},
                outputs=list(node.outputs), op=node.op, attrs={**node.attrs, "enable_gqa": True})


def _repeated_heads(name: str, values: dict, producer: dict) -> tuple[str, int] | None:
    """(x, n) where `name` is x (..., H, S, E) with each head repeated n times in place:
    reshape([copy of] expand(unsqueeze(x, -3), (..., H, n, S, E)), (..., H * n, S, E))."""
    reshape = producer.get(name)
    if reshape is None or reshape.target not in _RESHAPES:
        return None
    source = _input(reshape)
    if producer.get(source) is not None and producer[source].target == "aten.clone.default":
        source = _input(producer[source])
    expand = producer.get(source)
    unsqueeze = _input_node(expand, producer) if expand is not None and expand.target == "aten.expand.default" else None
    if unsqueeze is None or unsqueeze.target != "aten.unsqueeze.default":
        return None
    x = _input(unsqueeze)
    while producer.get(x) is not None and _full_slice(producer[x], values):
        x = _input(producer[x])
    xs, expanded, out = values[x].shape, values[expand.outputs[0]].shape, values[name].shape
    rank = len(xs)
    if not 3 <= rank <= 4 or unsqueeze.args[1] % (rank + 1) != rank - 2:
        return None
    n = expanded[rank - 2]
    if list(expanded) != list(xs[:rank - 2]) + [n] + list(xs[rank - 2:]):
        return None
    if list(out) != list(xs[:rank - 3]) + [xs[rank - 3] * n] + list(xs[rank - 2:]):
        return None
    return x, n


def _full_slice(node: Node, values: dict) -> bool:
    """x[:, :] along one dim: the same tensor (`hidden_states[:, :, None]` traces to it)."""
    if node.target != "aten.slice.Tensor" or len(node.outputs) != 1:
        return False
    x = _input(node)
    args = list(node.args) + [0, None, None, 1][len(node.args) - 1:]
    start, end, step = args[2], args[3], args[4]
    return (start in (0, None) and step == 1 and values[x].shape == values[node.outputs[0]].shape
            and (end is None or isinstance(end, int) and end >= values[x].shape[args[1]]))


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
