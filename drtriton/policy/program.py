"""A captured graph prepared for code generation: how forward names each value, and fragments.

The planner cuts the graph into fragments of at most `MAX_FRAGMENT_OPS` operators, each around
one *anchor* (a matmul, a convolution, a reduction, a normalisation...) with the elementwise
operators before it (prologue) and after it (epilogue) fused in, as DRTriton's test-time search
splits a program. A fragment is emitted as Triton (one kernel, or a few) or left to PyTorch.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field

from ..capture import ALLOCATIONS, VIEWS, Graph, Node, Value, is_scalar, value_refs
from ..ops import VOCABULARY
from ..errors import describe_exception
from . import recompute

MAX_FRAGMENT_OPS = 5

POINTWISE = {"elementwise_unary", "elementwise_binary"}
# anchors that read their main input elementwise, so a pointwise chain before them can be their
# prologue (pools: when their windows do not overlap, or the prologue would run once per window)
TAKES_PROLOGUE = ("reduction", "softmax", "norm", "scan", "loss", "pool")
_RESERVED = {"torch", "triton", "tl", "nn", "F", "math", "self", "grid", "random"}


def category(node: Node) -> str | None:
    return VOCABULARY[node.op].category if node.op in VOCABULARY else None


def is_pointwise(node: Node) -> bool:
    return category(node) in POINTWISE


@dataclass
class Fragment:
    nodes: list[Node]
    anchor: Node | None  # None: a pure pointwise fragment (or a view / PyTorch node)
    kind: str  # pointwise | <anchor category> | view | torch
    prologue: list[Node] = field(default_factory=list)  # pointwise nodes feeding the anchor
    epilogue: list[Node] = field(default_factory=list)  # pointwise nodes after it
    # moved to run before a fragment that reads it (`Program._late_inputs`): closed to fusion, as
    # a node joining it would be computed before the values it reads
    hoisted: bool = False

    @property
    def label(self) -> str:
        # aten.view.default -> view, operator.mul -> mul
        return ", ".join(n.op or (n.target.split(".")[1] if "." in n.target else n.target) for n in self.nodes)


def _position(frags: list[Fragment], frag: Fragment) -> int:
    """Where `frag` is in `frags` (by identity: fragments compare equal by content)."""
    return next(i for i, f in enumerate(frags) if f is frag)


def live_nodes(nodes: list[Node], outputs: list[str]) -> list[Node]:
    """The nodes the outputs need, in order: forward computes nothing else (a pooled output a
    wrapper never returns, an argmax only that pooling read)."""
    need, keep = set(outputs), set()
    for n in reversed(nodes):
        if any(o in need for o in n.outputs):
            keep.add(n.name)
            need.update(value_refs(n.args) + value_refs(list(n.kwargs.values())))
    return [n for n in nodes if n.name in keep]


class Program:
    """The graph plus what code generation needs to know about each value."""

    def __init__(self, graph: Graph, rewrites: list[str] | None = None):
        self.graph = graph
        self.rewrites = list(rewrites or [])  # algebraic rewrites applied to the captured graph
        self.values: dict[str, Value] = graph.values
        self.roots = set(graph.roots())  # what forward must compute: outputs, checked conditions
        self.nodes = live_nodes([n for n in graph.nodes if not n.mutates], self.roots)
        live = {n.name for n in self.nodes}
        self.users = {v: [u for u in us if u.name in live] for v, us in graph.users().items()}
        self.producer = graph.producer()
        self._names: dict[str, str] = {}
        self.notes: list[str] = []  # what code generation gave up on, and why (shown with each plan)
        # index arithmetic and reads through it, computed by the kernels that read them
        try:
            self.recomputed: set[str] = recompute.recomputed_nodes(self)
        except Exception as e:  # a bug in the classification costs the fusion, not the conversion
            self.recomputed = set()
            self.notes.append(f"index arithmetic stored, not recomputed ({describe_exception(e)})")
        self.recomputed_sizes: dict[str, list[str]] = {}  # recompute.shape_exprs' answers, per value

    def same_shape(self, a: str, b: str) -> bool:
        """Two values of one shape at every input size: the same sizes at capture, symbolic in
        the same dims (a batch traced at 1 is not a fixed size of 1)."""
        va, vb = self.values[a], self.values[b]
        return list(va.shape) == list(vb.shape) and sorted(va.symbolic) == sorted(vb.symbolic)

    # -- naming ------------------------------------------------------------------------------
    def expr(self, value: str) -> str:
        """How forward refers to a value: an argument, `self.<fqn>`, a literal, or a local."""
        v = self.values[value]
        if v.kind == "input":
            return value
        if v.kind in ("param", "buffer"):
            return v.access or "self." + v.fqn
        if v.kind == "const":
            if isinstance(v.literal, list):  # a tensor forward made from data, made alike
                return self.constant_tensor(value)
            return repr(v.literal)
        if value not in self._names:
            base = value.replace(".", "_")
            if keyword.iskeyword(base) or base in _RESERVED:
                base = f"{base}_"
            self._names[value] = base
        return self._names[value]

    def tensor_expr(self, value: str) -> str:
        """`expr`, but a tensor where an operator needs one: a 0-d constant as `torch.tensor(...)`
        rather than its number."""
        v = self.values[value]
        if v.kind == "const" and v.dtype.startswith("torch.") and v.literal is not None:
            return self.constant_tensor(value)
        return self.expr(value)

    def constant_tensor(self, value: str) -> str:
        """A constant's values as forward makes the tensor: `torch.tensor(...)` on its device."""
        v = self.values[value]
        return f"torch.tensor({v.literal!r}, dtype={v.dtype}, device={self.device()})"

    def device(self) -> str:
        """Where forward's tensors live: the device of its first tensor input (or parameter)."""
        for kinds in (("input",), ("param", "buffer")):
            for v in self.values.values():
                if v.kind in kinds and v.dtype.startswith("torch."):
                    return f"{self.expr(v.name)}.device"
        return '"cpu"'

    def is_tensor(self, value: str) -> bool:
        v = self.values[value]
        scalar_constant = v.kind == "const" and v.literal is not None and not isinstance(v.literal, list)
        return v.dtype.startswith("torch.") and not scalar_constant

    def inputs_of(self, node: Node) -> list[str]:
        return value_refs(node.args) + value_refs(list(node.kwargs.values()))

    def is_recomputed(self, value: str) -> bool:
        """Whether `value` is recomputed where it is read (`recompute`), never stored."""
        prod = self.producer.get(value)
        return prod is not None and prod.name in self.recomputed

    def recomputed_for(self, nodes: list[Node]) -> list[Node]:
        """The recomputed nodes `nodes` read, in order: what a fragment run as PyTorch computes
        first."""
        return recompute.cone(self, [v for n in nodes for v in self.inputs_of(n) if self.is_recomputed(v)])

    def reads(self, node: Node) -> list[str]:
        """The stored values a node reads: its inputs, with each recomputed one replaced by the
        tensors it reads through computed positions (and those whose sizes it takes: the `x` of a
        recomputed `zeros_like(x)` must be made first too)."""
        out = []
        for v in self.inputs_of(node):
            out += recompute.gathered(self, [v], shapes=True) if self.is_recomputed(v) else [v]
        return out

    def gathers_inside(self, nodes: list[Node], inside: list[Node]) -> bool:
        """Whether the recomputed values `nodes` read are read at computed positions from a tensor
        `inside` computes: one kernel would read it while it writes it."""
        made = {o for n in inside for o in n.outputs}
        recomputed = [v for n in nodes for v in self.inputs_of(n) if self.is_recomputed(v)]
        return any(v in made for v in recompute.gathered(self, recomputed))

    def used_outside(self, value: str, inside: set[str]) -> bool:
        """Whether `value` is needed by a node outside `inside` (names) or is a graph output."""
        if value in self.roots:
            return True
        return any(u.name not in inside for u in self.users.get(value, []) if not u.mutates)

    # -- fragments ---------------------------------------------------------------------------
    def fragments(self, fuse: bool = True) -> list[Fragment]:
        """Cut the graph into fragments. With `fuse`, pointwise operators join the anchor they
        follow (epilogue) or feed (prologue); without, every operator stands alone."""
        frags: list[Fragment] = []
        owner: dict[str, Fragment] = {}  # node name -> its fragment

        for node in self.nodes:
            if node.name in self.recomputed:
                continue  # computed inside the fragments that read it
            cat = category(node)
            if (node.target in VIEWS or node.target in ALLOCATIONS or is_scalar(node, self.values)) \
                    and node.op is None:
                frag = Fragment([node], None, "view")
            elif node.op is None:
                frag = Fragment([node], None, "torch")
            elif cat in POINTWISE:
                target = self._fusion_target(node, owner, frags) if fuse else None
                if target is not None and target.anchor is None:
                    for sibling in self._siblings(node, target, owner):  # (a*b + c*d: one kernel)
                        target.nodes = sorted(sibling.nodes + target.nodes, key=self.nodes.index)
                        owner.update({n.name: target for n in sibling.nodes})
                        frags[:] = [f for f in frags if f is not sibling]
                if target is not None:
                    # asked again after the siblings joined: one of them may have been a late input
                    for early in self._late_inputs(node, target, owner, frags) or []:  # (a weight's 1 + w)
                        frags[:] = [f for f in frags if f is not early]
                        frags.insert(_position(frags, target), early)
                        early.hoisted = True
                    target.nodes.append(node)
                    if target.anchor is not None:
                        target.epilogue.append(node)
                    owner[node.name] = target
                    continue
                frag = Fragment([node], None, "pointwise")
            else:
                frag = Fragment([node], node, cat)
                if fuse:
                    self._take_prologue(frag, owner, frags)
            frags.append(frag)
            for n in frag.nodes:
                owner[n.name] = frag
        return [f for f in frags if f.nodes]

    def _fusion_target(self, node: Node, owner: dict[str, Fragment], frags: list[Fragment]) -> Fragment | None:
        """The fragment a pointwise node can join as epilogue: the one producing its tensor
        input of the full output shape, if that value is not needed elsewhere in between."""
        candidates = []
        for name in self.inputs_of(node):
            prod = self.producer.get(name)
            if prod is None or prod.name not in owner:
                continue
            frag = owner[prod.name]
            if frag.kind in ("view", "torch") or frag.hoisted or len(frag.nodes) >= MAX_FRAGMENT_OPS:
                continue
            if not self.same_shape(name, node.outputs[0]):
                continue
            if frag.anchor is not None and not _anchor_takes_epilogue(frag):
                continue
            candidates.append(frag)
        # the latest producer first; an earlier one where the latest cannot take it: in
        # where(cumsum(x) <= t, x, 0), x's producer comes last among where's inputs but runs
        # before the scan, so where joins the scan's fragment (whose kernel has x loaded)
        for frag in reversed(candidates):
            if self.gathers_inside([node], frag.nodes):
                continue
            # every other tensor input must be computed before the fragment runs, not inside it
            # later, unless what computes it can run before the fragment (`_late_inputs`)
            if self._late_inputs(node, frag, owner, frags) is None:
                continue
            # a value the fragment produced and someone else needs must stay stored: allowed, the
            # emitters store every value used outside the fragment
            return frag
        return None

    def _late_inputs(self, node: Node, frag: Fragment, owner: dict[str, Fragment],
                     frags: list[Fragment]) -> list[Fragment] | None:
        """The fragments after `frag` computing `node`'s other inputs, each of which can run
        before `frag` instead: it reads only what fragments before `frag` compute, or fragments
        after it that can move too (a parameter's `1 + w`, which Gemma computes after its norm;
        `route[:, None]`, a view of a view). Dependencies come first. None where one cannot."""
        where = {id(f): i for i, f in enumerate(frags)}  # (by identity: fragments compare by content)
        inside, at = {n.name for n in frag.nodes}, where[id(frag)]
        late: list[Fragment] = []

        def movable(other: Fragment) -> bool:
            if other.kind == "torch":
                return False
            # what it reads, sizes its recomputed index arithmetic reads included
            reads = [v for n in other.nodes for v in self.reads(n)]
            reads += [v for n in self.recomputed_for(other.nodes) for v in self.inputs_of(n)]
            for v in reads:
                q = self.producer.get(v)
                if q is None or q.name in self.recomputed or owner.get(q.name) is other:
                    continue
                earlier = owner.get(q.name)
                if earlier is None or earlier is frag:
                    return False
                if where[id(earlier)] > at and all(f is not earlier for f in late) and not movable(earlier):
                    return False
            if all(f is not other for f in late):
                late.append(other)
            return True

        for name in self.reads(node):
            prod = self.producer.get(name)
            other = owner.get(prod.name) if prod is not None and prod.name not in inside else None
            if other is None or where[id(other)] < at or any(f is other for f in late):
                continue
            if not movable(other):
                return None
        return late

    def _siblings(self, node: Node, target: Fragment, owner: dict[str, Fragment]) -> list[Fragment]:
        """The other pointwise fragments computing an input of `node` (of its shape) that can run
        inside `target`, which `node` joins: nothing but the three reads their values, so none
        is needed before `target` runs."""
        out: list[Fragment] = []
        size = len(target.nodes) + 1
        for name in self.inputs_of(node):
            prod = self.producer.get(name)
            frag = owner.get(prod.name) if prod is not None else None
            if frag is None or frag is target or frag in out or frag.kind != "pointwise" or frag.anchor is not None \
                    or frag.hoisted \
                    or not self.same_shape(name, node.outputs[0]) or size + len(frag.nodes) > MAX_FRAGMENT_OPS:
                continue
            inside = {n.name for n in frag.nodes + target.nodes + [node]}
            if any(u.name not in inside for n in frag.nodes for o in n.outputs for u in self.users.get(o, [])):
                continue
            merged = frag.nodes + target.nodes + [node]
            if self.gathers_inside(merged, merged):
                continue
            out.append(frag)
            size += len(frag.nodes)
        return out

    def _take_prologue(self, frag: Fragment, owner, frags: list[Fragment]) -> None:
        """Pull a pure pointwise fragment that only feeds this anchor into it, when the anchor
        kind reads its input elementwise (reductions, softmax, norms)."""
        main = self.inputs_of(frag.anchor)[0]
        prod = self.producer.get(main)
        if prod is None or prod.name not in owner:
            return
        pre = owner[prod.name]
        if pre is not frags[-1] or not self.can_prologue(pre, frag):
            return
        frags.pop()
        frag.prologue = pre.nodes
        frag.nodes = pre.nodes + frag.nodes
        for n in pre.nodes:
            owner[n.name] = frag

    def can_prologue(self, pre: Fragment, frag: Fragment) -> bool:
        """Whether pointwise fragment `pre` can run as the prologue of anchor fragment `frag`:
        the anchor reads its main input elementwise, `pre` computes it, nothing else needs
        `pre`'s values, and the two fit in one fragment."""
        if (frag.kind not in TAKES_PROLOGUE or frag.prologue or pre.kind != "pointwise"
                or len(pre.nodes) + len(frag.nodes) > MAX_FRAGMENT_OPS):
            return False
        if self.inputs_of(frag.anchor)[0] not in {o for n in pre.nodes for o in n.outputs}:
            return False
        if frag.kind == "pool" and not self._disjoint_windows(frag.anchor):
            return False
        if self.gathers_inside(pre.nodes + frag.nodes, pre.nodes + frag.nodes):
            return False
        inside = {n.name for n in pre.nodes} | {frag.anchor.name}
        return not any(self.used_outside(out, inside) for n in pre.nodes for out in n.outputs)

    def _disjoint_windows(self, pool: Node) -> bool:
        """Whether each input element lies in at most one of the pool's windows."""
        a = pool.attrs
        if "output_size" in a:  # adaptive: windows tile the input when the sizes divide
            xs = self.values[self.inputs_of(pool)[0]].shape
            outs = a["output_size"]
            return all(o and i % o == 0 for i, o in zip(xs[len(xs) - len(outs):], outs))
        span = [(k - 1) * d + 1 for k, d in zip(a["kernel_size"], a.get("dilation") or [1] * len(a["kernel_size"]))]
        return all(s >= w for s, w in zip(a["stride"], span))


def _anchor_takes_epilogue(frag: Fragment) -> bool:
    if frag.anchor is not None and frag.anchor.op in ("cat", "stack") and \
            len(frag.anchor.args[0]) > recompute.MAX_CAT_BRANCHES:
        # with an epilogue each element loads under every input's mask; without, each input is
        # copied into its place, and what follows reads the result (or takes it as a prologue)
        return False
    return frag.kind in ("pointwise", "matmul", "conv", "reduction", "softmax", "norm", "pool", "scan", "indexing")
