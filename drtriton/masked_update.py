"""`y[m] = f(x[m])` with f elementwise, as `where(m, f(x), y)`: no selection at all.

Written as it reads, the update selects the masked elements (a compaction: a count read back to
the host, then a scatter of their positions), computes f on them, and writes them back through a
cumsum of the mask. When f is elementwise over the selection (and its other operands are the same
for every selected element), computing f everywhere and choosing with the mask gives the same
values with one pointwise pass and no data-dependent size. Runs on export's graph, before
lowering: `push_elementwise_into_masked_updates(gm)`.
"""

from __future__ import annotations

import operator


def push_elementwise_into_masked_updates(gm) -> int:
    """Rewrite each such update of `gm`'s graph in place; the number rewritten."""
    import torch

    aten = torch.ops.aten
    graph = gm.graph
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (aten.index_put_.default, aten.index_put.default):
            continue
        mask_at = _one_trailing_mask(node.args[1])
        if mask_at is None:
            continue
        y, indices, values = node.args[:3]
        accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
        if node.target is aten.index_put_.default and (len(y.users) > 1 or not _fresh(y)):
            continue  # updated in place: an input, a view of another tensor, or read again after
        y_val = y.meta.get("val")
        mask = indices[mask_at]
        after = y_val.dim() - mask_at - mask.meta["val"].dim()
        lifted = _Lift(graph, node, indices, y_val, after).value(values)
        if lifted is None:
            continue
        with graph.inserting_before(node):
            chosen = mask
            for _ in range(after):  # the mask over its dims of y, broadcast along the ones after
                chosen = _call(graph, aten.unsqueeze.default, (chosen, -1))
            if lifted.meta["val"].dtype != y_val.dtype:
                lifted = _call(graph, aten._to_copy.default, (lifted,), {"dtype": y_val.dtype})
            # y a clone only this update read: the clone's source (the update now writes a new tensor)
            kept = y.args[0] if y.target is aten.clone.default and not y.kwargs else y
            if accumulate:
                update = _call(graph, aten.where.ScalarOther, (chosen, lifted, 0))
                result = _call(graph, aten.add.Tensor, (kept, update))
            else:
                result = _call(graph, aten.where.self, (chosen, lifted, kept))
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        done += 1
    if done:
        _drop_unused_selections(graph)
        graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return done


def _fresh(node) -> bool:
    """A tensor an operator made, sharing no storage (no input, no view)."""
    import torch

    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    return not any(r.alias_info is not None for r in node.target._schema.returns)


def _one_trailing_mask(indices) -> int | None:
    """The position of the one boolean mask among `indices` (full slices before it), or None."""
    import torch

    given = [i for i, m in enumerate(indices) if m is not None]
    if len(given) != 1 or given[0] != len(indices) - 1:
        return None
    val = getattr(indices[given[0]], "meta", {}).get("val")
    return given[0] if val is not None and val.dtype == torch.bool else None


class _Lift:
    """The values of an update as a full-size tensor: each `x[m]` (the update's own mask, on a
    tensor of y's shape) becomes x, each elementwise op is made again on lifted operands; operands
    the same for every selected element (numbers, tensors over the dims after the mask) stay."""

    def __init__(self, graph, update, indices, y_val, after: int):
        self.graph, self.update, self.indices, self.y_val, self.after = graph, update, indices, y_val, after
        self.made: dict = {}
        self.selected = False  # whether the values read the selection at all

    def value(self, v):
        lifted = self._lift(v)
        return lifted if self.selected else None

    def _lift(self, v):
        import torch
        from torch.fx import Node

        if not isinstance(v, Node):
            return v if isinstance(v, (int, float, bool)) else None
        if v in self.made:
            return self.made[v]
        val = v.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return None
        out = None
        if v.target is torch.ops.aten.index.Tensor and self._selects(v):
            out = v.args[0]
            self.selected = True
        elif val.dim() <= self.after and not _follows_data(val):
            out = v  # the same for every selected element
        elif v.op == "call_function" and isinstance(v.target, torch._ops.OpOverload) \
                and torch.Tag.pointwise in v.target.tags and not v.kwargs:
            args = [self._lift(a) if isinstance(a, Node) else a for a in v.args]
            if all(a is not None for a in args):
                with self.graph.inserting_before(self.update):
                    out = _call(self.graph, v.target, tuple(args))
        self.made[v] = out
        return out

    def _selects(self, index) -> bool:
        """`index` is x[m] with the update's own mask (the same node, or one computed alike) on
        an x of y's shape."""
        x, their = index.args[0], index.args[1]
        x_val = getattr(x, "meta", {}).get("val")
        if x_val is None or len(their) != len(self.indices) or not _same_shape(x_val.shape, self.y_val.shape):
            return False
        return all((a is None and b is None) or (a is not None and b is not None and _same(a, b))
                   for a, b in zip(their, self.indices))


def _call(graph, target, args: tuple, kwargs: dict | None = None):
    """A new node, its fake value computed from its operands' (as export would have)."""
    from torch.fx import Node
    from torch.utils._pytree import tree_map

    node = graph.call_function(target, args, kwargs or {})
    fake = tree_map(lambda a: a.meta["val"] if isinstance(a, Node) else a, (args, kwargs or {}))
    mode = next(a.meta["val"].fake_mode for a in args if isinstance(a, Node))
    with mode:
        node.meta["val"] = target(*fake[0], **fake[1])
    return node


def _same(a, b) -> bool:
    """Two nodes computing the same value: one node, or the same operator on the same operands."""
    from torch.fx import Node

    if a is b:
        return True
    if not (isinstance(a, Node) and isinstance(b, Node)) or a.op != "call_function" or b.op != "call_function":
        return False
    if a.target is not b.target or len(a.args) != len(b.args) or a.kwargs != b.kwargs:
        return False
    return all(_same(x, y) if isinstance(x, Node) else x == y for x, y in zip(a.args, b.args))


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(x is y or str(x) == str(y) for x, y in zip(a, b))


def _follows_data(val) -> bool:
    """A size that is no input's (a count of selected elements: an unbacked symbol)."""
    return any(not isinstance(s, int) and not s.node.has_hint() for s in val.shape)


def _drop_unused_selections(graph) -> None:
    """Remove the selections an update no longer reads: export keeps each one alive through a
    runtime assertion on its size (`_assert_scalar(u0 >= 0)`), true of any count."""
    import torch

    aten = torch.ops.aten
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.index.Tensor:
            continue
        sizes = list(node.users)
        if not sizes or not all(s.target is aten.sym_size.int for s in sizes):
            continue
        checks = [c for s in sizes for c in s.users]
        if not all(c.target in (operator.ge, operator.gt) and len(c.users) > 0
                   and all(a.target is aten._assert_scalar.default for a in c.users) for c in checks):
            continue
        for c in checks:
            for a in list(c.users):
                graph.erase_node(a)
            graph.erase_node(c)
        for s in sizes:
            graph.erase_node(s)
