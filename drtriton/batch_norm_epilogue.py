"""An eval-mode batch norm after a convolution or a matrix product, written as the per-channel
affine map it is, so it runs in that operator's epilogue (as Inductor decomposes it to
pointwise ops and fuses them there): y = x * scale + shift, with

    scale = weight * rsqrt(running_var + eps)        (rsqrt(running_var + eps) without a weight)
    shift = bias - running_mean * scale              (- running_mean * scale without a bias)

computed from the parameters alone. The policy recomputes those in the kernel that reads them
(`policy/recompute.py`, "parameter" values), so a ResNet block's conv, batch norm and ReLU are one
kernel with nothing stored between them. The same form as the batch-norm template's eval apply
(and PyTorch's CPU kernel). Only where the operator's output feeds the batch norm alone: elsewhere
the batch norm keeps its own template, which needs no recomputation per element.
"""

from __future__ import annotations

import warnings

from .capture import VIEWS, Graph, Node, Value
from .errors import describe_exception
from .ops import VOCABULARY
from .ops.aten import match

#: the lowered eval batch norm returns a tuple; its output 0 is the result
_TARGETS = ("aten.batch_norm.default", "aten._native_batch_norm_legit_no_training.default")
_ANCHORS = ("conv", "matmul")  # categories whose kernels take an elementwise epilogue


def batch_norm_epilogues(graph: Graph) -> Graph:
    """`graph` with each eval batch norm that follows a convolution or matrix product (its only
    reader) written as x * scale + shift (in place). An error leaves the graph as it was."""
    try:
        return _rewrite(graph)
    except Exception as e:  # noqa: BLE001 - a lost fusion, never a lost conversion
        warnings.warn(f"drtriton: batch norms left whole ({describe_exception(e)})", stacklevel=2)
        return graph


def _tensor(node: Node, i: int) -> str | None:
    a = node.args[i] if i < len(node.args) else None
    return a["value"] if isinstance(a, dict) and "value" in a else None


def _foldable(graph: Graph, bn: Node, producer: dict, users: dict) -> bool:
    if bn.target not in _TARGETS or bn.op != "batch_norm" or bn.attrs.get("training") or bn.mutates:
        return False
    x, mean, var = _tensor(bn, 0), _tensor(bn, 3), _tensor(bn, 4)
    if x is None or mean is None or var is None:
        return False
    xv = graph.values[x]
    if len(xv.shape) < 2 or xv.dtype != "torch.float32" or xv.shape[1] is None:
        return False
    params = [v for v in (_tensor(bn, 1), _tensor(bn, 2), mean, var) if v is not None]
    if any(graph.values[v].kind not in ("param", "buffer") or graph.values[v].dtype != "torch.float32"
           or list(graph.values[v].shape) != [xv.shape[1]] for v in params):
        return False
    prod = producer.get(x)
    if prod is None or prod.op is None or VOCABULARY[prod.op].category not in _ANCHORS:
        return False
    if x in graph.roots() or [u.name for u in users.get(x, [])] != [bn.name]:
        return False
    # the tuple form: only its result is read
    return all(not users.get(o) and o not in graph.roots() for o in bn.outputs[1:])


def _rewrite(graph: Graph) -> Graph:
    producer, users = graph.producer(), graph.users()
    out: list[Node] = []
    for bn in graph.nodes:
        if not _foldable(graph, bn, producer, users):
            out.append(bn)
            continue
        out += _affine(graph, bn)
    graph.nodes[:] = out
    return graph


def _affine(graph: Graph, bn: Node) -> list[Node]:
    """The nodes computing `bn`'s result as x * scale + shift; the last one takes its output name."""
    x, w, b, mean, var = (_tensor(bn, i) for i in range(5))
    xv = graph.values[x]
    channels = xv.shape[1]
    nodes: list[Node] = []

    def add(target: str, args: list, shape: list, name: str | None = None) -> str:
        name = name or graph.fresh_name(f"{bn.name}_affine")
        symbolic = list(xv.symbolic) if list(shape) == list(xv.shape) else []
        graph.values[name] = Value(name, list(shape), "torch.float32", "node", symbolic=symbolic)
        node = Node(name, target, args, {}, [name])
        m = match(node, graph.values)
        if m is not None:
            node.op, node.attrs = m
        elif target not in VIEWS:
            raise ValueError(f"{target} does not map onto the vocabulary")
        nodes.append(node)
        return name

    eps = float(bn.attrs["eps"])
    scale = add("aten.rsqrt.default", [{"value": add("aten.add.Tensor", [{"value": var}, eps], [channels])}],
                [channels])
    if w is not None:
        scale = add("aten.mul.Tensor", [{"value": w}, {"value": scale}], [channels])
    moved = add("aten.mul.Tensor", [{"value": mean}, {"value": scale}], [channels])
    shift = add("aten.sub.Tensor", [{"value": b}, {"value": moved}], [channels]) if b is not None else \
        add("aten.neg.default", [{"value": moved}], [channels])
    per_channel = [channels] + [1] * (len(xv.shape) - 2)  # (C, 1, 1) beside (N, C, H, W)
    if len(per_channel) > 1:
        scale = add("aten.view.default", [{"value": scale}, per_channel], per_channel)
        shift = add("aten.view.default", [{"value": shift}, per_channel], per_channel)
    scaled = add("aten.mul.Tensor", [{"value": x}, {"value": scale}], xv.shape)
    result = bn.outputs[0]
    del graph.values[result]
    add("aten.add.Tensor", [{"value": scaled}, {"value": shift}], xv.shape, name=result)
    for o in bn.outputs[1:]:  # the tuple form's statistics, unread
        graph.values.pop(o, None)
    return nodes

