"""Algebraic rewrites of a captured graph before it is cut: sums over a linear operator's output.

A sum (or mean) over the features a linear operator produces needs none of them one by one:

    sum_j (x W^T + b)_j                  = x . (sum_j W_j) + sum_j b_j
    sum_j (x @ B)_j                      = x . (sum_j B_:,j)
    sum over positions of conv_transpose = (sum over positions of x) @ (sum over taps of W) + P b
                                           (no padding: every product lands in the output)

so the reduction moves onto the operands: a matrix-vector product where there was a GEMM, a sum
and a small matmul where there was a transposed convolution. Multiplications and divisions by a
number between the operator and the reduction commute with it and move after it. The rewritten
graph computes the same function as the captured one, in other rounding; the verifier judges it
as any other plan (against the float64 reference where fp32's own rounding is in question).
"""

from __future__ import annotations

import copy
import math

from ..capture import Graph, Node, Value, value_refs
from ..ops.aten import match
from .program import VIEWS

SCALES = ("mul_scalar", "div_scalar")  # commute with a sum


def fold_linear_reductions(graph: Graph) -> tuple[Graph, list[str]]:
    """`graph` with each foldable reduction rewritten (the same object when there is none), and
    a line per rewrite saying what was folded."""
    g, done = copy.deepcopy(graph), []  # a fold that does not apply leaves g as it was
    for name in [n.name for n in graph.nodes if n.op in ("sum", "mean")]:
        red = next(n for n in g.nodes if n.name == name)  # folds remove no other reduction
        lin = _fold(g, red)
        if lin is not None:
            _drop_unused(g)
            done.append(f"the {red.op} over {lin.op}'s output folded into its operands")
    return (g, done) if done else (graph, [])


def _drop_unused(g: Graph) -> None:
    """Remove views nothing reads any more (the transpose of a weight a fold no longer
    multiplies). Views only: they compute nothing, and no in-place operator is among them."""
    while True:
        used = set(g.roots()) | {v for n in g.nodes for v in value_refs(n.args) + value_refs(list(n.kwargs.values()))}
        dead = [n for n in g.nodes if n.target in VIEWS and n.op is None and not n.mutates
                and not any(o in used for o in n.outputs)]
        if not dead:
            return
        for n in dead:
            g.nodes.remove(n)
            for o in n.outputs:
                g.values.pop(o, None)


class _Builder:
    """New nodes over the vocabulary, named after the reduction they replace."""

    def __init__(self, graph: Graph, stem: str, dtype: str):
        self.graph, self.stem, self.dtype = graph, stem, dtype
        self.nodes: list[Node] = []

    def add(self, target: str, args: list, shape: list[int], name: str | None = None,
            symbolic: list[int] | None = None) -> str:
        """A node computing `shape`; its symbolic dims (the batch) are `symbolic`, by default
        those of its first tensor argument of the same shape (elementwise: they broadcast alike)."""
        name = name or self._fresh()
        if symbolic is None:
            same = (self.graph.values[v] for v in value_refs(args))
            symbolic = next((list(v.symbolic) for v in same if list(v.shape) == list(shape)), [])
        self.graph.values[name] = Value(name, list(shape), self.dtype, "node", symbolic=symbolic)
        node = Node(name, target, args, {}, [name])
        m = match(node, self.graph.values)
        if m is not None:
            node.op, node.attrs = m
        self.nodes.append(node)
        return name

    def _fresh(self) -> str:
        i = len(self.nodes)
        while f"{self.stem}_fold{i}" in self.graph.values:
            i += 1
        return f"{self.stem}_fold{i}"

    def sum(self, x: str, dims: list[int], keepdim: bool) -> str:
        shape, symbolic = self.graph.values[x].shape, self.graph.values[x].symbolic
        out = [1 if d in dims else s for d, s in enumerate(shape) if keepdim or d not in dims]
        kept = [d for d in range(len(shape)) if keepdim or d not in dims]  # x's dim of each output dim
        return self.add("aten.sum.dim_IntList", [{"value": x}, dims, keepdim], out,
                        symbolic=[i for i, d in enumerate(kept) if d in symbolic and d not in dims])

    def shape(self, x: str) -> list[int]:
        return self.graph.values[x].shape


def _fold(g: Graph, red: Node) -> Node | None:
    """Rewrite `red` in place in `g`; the linear operator it folded into, or None."""
    producer, users = g.producer(), g.users()

    def only_use(value: str, node: Node) -> bool:
        return value not in g.roots() and [u.name for u in users.get(value, [])] == [node.name]

    # red <- scales <- the linear operator, each value used once
    chain: list[Node] = []
    src = value_refs(red.args)[0]
    while (p := producer.get(src)) is not None and p.op in SCALES and only_use(src, chain[0] if chain else red):
        chain.insert(0, p)
        src = value_refs(p.args)[0]
    lin = producer.get(src)
    if lin is None or not only_use(src, chain[0] if chain else red) or lin.op not in _FOLDS:
        return None
    out_shape, out_symbolic = g.values[red.outputs[0]].shape, list(g.values[red.outputs[0]].symbolic)
    b = _Builder(g, red.name, g.values[red.outputs[0]].dtype)
    result = _FOLDS[lin.op](b, lin, tuple(red.attrs["dim"]), bool(red.attrs["keepdim"]),
                            mean=red.op == "mean", out_shape=out_shape)
    if result is None:
        return None
    assert b.nodes[-1].outputs == [result]
    g.values[result].symbolic = list(out_symbolic)  # the reduction's shape, batch included
    # the scales now act on the reduced value; the last one (or the fold) keeps the reduction's name
    for node in chain:
        node.args[0] = {"value": result}
        g.values[node.outputs[0]].shape = list(out_shape)
        g.values[node.outputs[0]].symbolic = list(out_symbolic)
        result = node.outputs[0]
    if chain:
        del g.values[chain[-1].outputs[0]]
        chain[-1].outputs = [red.outputs[0]]
    else:
        _rename_output(g, b.nodes[-1], red.outputs[0])
    spliced = b.nodes + chain
    del g.values[lin.outputs[0]]
    # where the linear operator stood: the new nodes read its operands as it did (before
    # anything later changes them in place), and the chain reads only what they compute
    at = g.nodes.index(lin)
    rest = [n for n in g.nodes if n.name not in {lin.name, red.name} and n not in chain]
    g.nodes[:] = rest[:at] + spliced + rest[at:]
    return lin


def _rename_output(g: Graph, node: Node, name: str) -> None:
    old = node.outputs[0]
    g.values[name] = g.values.pop(old)
    g.values[name].name = name
    node.outputs = [name]


def _scaled(b: _Builder, z: str, count: int, mean: bool) -> str:
    return b.add("aten.div.Tensor", [{"value": z}, count], b.shape(z)) if mean else z


def _linear(b: _Builder, lin: Node, dims, keepdim, mean, out_shape) -> str | None:
    """sum_j (x W^T + b)_j = sum_k x_k (sum_j W_jk) + sum_j b_j, over the last dim only."""
    if lin.target != "aten.linear.default":
        return None
    x, w = lin.args[0]["value"], lin.args[1]["value"]
    bias = lin.args[2] if len(lin.args) > 2 and isinstance(lin.args[2], dict) else None
    rank = len(b.shape(x))
    if dims != (rank - 1,) or len(b.shape(w)) != 2:
        return None
    n = b.shape(w)[0]
    w_sum = b.sum(w, [0], False)
    prod = b.add("aten.mul.Tensor", [{"value": x}, {"value": w_sum}], b.shape(x))
    z = b.sum(prod, [rank - 1], keepdim)
    if bias is not None:
        z = b.add("aten.add.Tensor", [{"value": z}, {"value": b.sum(bias["value"], [0], False)}], out_shape)
    return _scaled(b, z, n, mean)


def _matmul(b: _Builder, mm: Node, dims, keepdim, mean, out_shape) -> str | None:
    """sum_j (x B)_j = sum_k x_k (sum_j B_kj), for a 2-D B, over the last dim only."""
    if mm.target not in ("aten.matmul.default", "aten.mm.default"):  # not einsum's equation
        return None
    x, m = mm.args[0]["value"], mm.args[1]["value"]
    rank = len(b.shape(x))
    if dims != (rank - 1,) or len(b.shape(m)) != 2 or rank < 2:
        return None
    base = _transposed(b.graph, m)  # x @ W.T: sum W's rows, not a copy of its transpose
    m_sum = b.sum(base, [0], False) if base else b.sum(m, [1], False)
    prod = b.add("aten.mul.Tensor", [{"value": x}, {"value": m_sum}], b.shape(x))
    return _scaled(b, b.sum(prod, [rank - 1], keepdim), b.shape(m)[1], mean)


def _transposed(g: Graph, value: str) -> str | None:
    """The 2-D tensor `value` is the transpose of, when a view node made it so."""
    node = g.producer().get(value)
    if node is None or len(g.values[value].shape) != 2:
        return None
    swap = (node.target in ("aten.t.default", "aten.numpy_T.default")
            or (node.target == "aten.transpose.int" and sorted(int(d) % 2 for d in node.args[1:3]) == [0, 1])
            or (node.target == "aten.permute.default" and list(node.args[1]) in ([1, 0], [-1, -2])))
    return node.args[0]["value"] if swap else None


def _conv_transpose(b: _Builder, conv: Node, dims, keepdim, mean, out_shape) -> str | None:
    """The sum over all output positions of a transposed convolution without padding:
    (sum of x over positions) @ (sum of W over taps) + (positions) * bias."""
    a = conv.attrs
    x, w = conv.args[0]["value"], conv.args[1]["value"]
    bias = conv.args[2] if len(conv.args) > 2 and isinstance(conv.args[2], dict) else None
    rank = len(b.shape(x))
    spatial = tuple(range(2, rank))
    if rank != len(b.shape(w)) or dims != spatial or a["groups"] != 1 or any(a["padding"]):
        return None  # (an unbatched input has no batch dim: rank one less than the weight's)
    positions = math.prod(b.graph.values[conv.outputs[0]].shape[2:])
    n, co = b.shape(x)[0], b.shape(w)[1]
    z = b.add("aten.matmul.default", [{"value": b.sum(x, list(spatial), False)},
                                      {"value": b.sum(w, list(range(2, len(b.shape(w)))), False)}], [n, co],
              symbolic=[0] if 0 in b.graph.values[x].symbolic else [])
    z = _scaled(b, z, positions, mean)
    if bias is not None:
        per_channel = bias["value"] if mean else b.add("aten.mul.Tensor", [bias, positions], [co])
        z = b.add("aten.add.Tensor", [{"value": z}, {"value": per_channel}], [n, co])
    if keepdim:
        # -1 for the batch: the converted module takes other batch sizes
        z = b.add("aten.view.default", [{"value": z}, [-1, *out_shape[1:]]], out_shape)
    return z


_FOLDS = {
    "linear": _linear,
    "matmul": _matmul,
    "conv_transpose1d": _conv_transpose,
    "conv_transpose2d": _conv_transpose,
    "conv_transpose3d": _conv_transpose,
}
