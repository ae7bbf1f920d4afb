"""Elementwise operators as Triton code, evaluated per element of some output tile.

Every kernel template (a plain elementwise kernel, a matmul's epilogue, a reduction's prologue)
describes where its current elements are with an `IndexSpace`; `PointwiseBlock` then emits the
loads of the other operands (broadcast through strides: the kernel reads an operand's stride only
along the dimensions it varies in, so the launcher passes the operand's own strides) and one line
per operator, from the vocabulary's Triton templates.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ..capture import Node
from ..ops import VOCABULARY
from ..ops.elementwise import PROPAGATE_NAN
from ..ops.operator import float_source
from . import recompute
from .program import Program


@dataclass
class Axes:
    """A run of output dimensions `first..last` whose row-major index the template already holds
    in `var` (a Triton expression): indices along them come from `var` alone, with divisions by
    the sizes of those dimensions only. `scalar`: `var` is one value per program (an operand
    that varies only along these dimensions is then one scalar load)."""

    var: str
    first: int
    last: int
    scalar: bool = False


@dataclass
class IndexSpace:
    """The elements a kernel handles right now: a tile over an output of `rank` dimensions.

    `flat`: the offset of each element in the contiguous output (a Triton expression);
    `index(d)`: its index along output dimension d (declared lazily, with `sizes` the names of
    the runtime sizes of dimensions 1..rank-1); `mask`: which elements are real. `axes`: runs of
    dimensions whose index the template holds already (a program's row, a reduction's r and
    columns), so their indices need no division of the flat offset."""

    rank: int
    flat: str
    mask: str
    sizes: list[str]  # kernel parameter names holding the sizes of dims 1..rank-1
    axes: list[Axes] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # index declarations made so far
    _declared: dict[int, str] = field(default_factory=dict)

    def axes_of(self, d: int) -> Axes:
        return next((a for a in self.axes if a.first <= d <= a.last), Axes(self.flat, 0, self.rank - 1))

    def index(self, d: int) -> str:
        if d not in self._declared:
            a = self.axes_of(d)
            name = f"i{d}"
            inner = " * ".join(self.sizes[d:a.last])  # sizes of dims d+1..last
            expr = f"({a.var} // ({inner}))" if inner else a.var
            if d > a.first:
                expr = f"{expr} % {self.sizes[d - 1]}"
            self.lines.append(f"{name} = {expr}")
            self._declared[d] = name
        return self._declared[d]


def tuple_source(parts: list[str]) -> str:
    """A tuple display of expressions: `(a, b)`, `(a,)`, `()`."""
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"


def _literal(x, integral: bool = False) -> str:
    """A number written into a kernel: a float, or an integer where the result is an integer
    (a float there would make the result a float)."""
    if isinstance(x, bool):
        return "1.0" if x else "0.0"
    if integral and isinstance(x, int):
        return str(x)
    return float_source(float(x)) if isinstance(x, (int, float)) else repr(x)


@dataclass
class Broadcast:
    """Tensors broadcast to one shape, as capture saw them: the dims along which each varies (its
    size-1 and missing dims are read with stride 0, so the kernel reads its strides only along
    the others), the shape's sizes taken from them in forward, and the launch side that passes
    each with its own strides after a check of its shape (`torch.broadcast_shapes` costs the
    host 13 us a call on CPU, 50-60 us on an H200's; `expand` 1-2 us)."""

    program: Program
    shape: list[int]
    symbolic: set[int]  # the shape's symbolic dims (the batch)

    @classmethod
    def of(cls, program: Program, values: list[str]) -> Broadcast:
        """The shape `values` broadcast to (PyTorch's rule: aligned right, a size of 1 stretches)."""
        rank = max((len(program.values[v].shape) for v in values), default=0)
        shape, symbolic = [1] * rank, set()
        for v in values:
            sizes = program.values[v].shape
            for d, size in enumerate(sizes):
                if size != 1:
                    shape[rank - len(sizes) + d] = size
            symbolic |= aligned_symbolic(program, v, rank)
        return cls(program, shape, symbolic)

    def full(self, value: str) -> bool:
        """A tensor of the shape itself. A fixed size of 1 where the shape's is symbolic (a weight
        beside a batch traced at 1) is not."""
        return (list(self.program.values[value].shape) == self.shape
                and aligned_symbolic(self.program, value, len(self.shape)) == self.symbolic)

    def varying(self, value: str) -> list[int]:
        """The dims of the shape along which `value` changes (a symbolic size of 1 is the batch
        traced at 1, so it changes)."""
        vs = list(self.program.values[value].shape)
        lead, sym = len(self.shape) - len(vs), aligned_symbolic(self.program, value, len(self.shape))
        return [d for d in range(len(self.shape)) if d >= lead and (vs[d - lead] != 1 or d in sym)
                and (self.shape[d] != 1 or d in self.symbolic)]

    def stretchable(self, value: str) -> list[int]:
        """The dims where `value` had a symbolic size of 1 at capture beside a larger size of the
        shape: a size that may stay 1 and broadcast (j of (1, 4) beside i of (9, 1) as index_put
        traces them, each with a symbolic lead) or may be the shape's. Only the call tells. (A
        batch traced at 1 has the shape's size 1 too: the same symbol, checked as any size.)"""
        sizes = self.program.values[value].shape
        lead = len(self.shape) - len(sizes)
        return [d for d in self.varying(value) if sizes[d - lead] == 1 and self.shape[d] != 1]

    def shape_source(self, values: list[str]) -> str:
        """The shape as forward computes it from `values`: one's shape when it has the shape (the
        module then works at other sizes too), else each dim's size from a value that varies
        along it."""
        for v in values:
            if self.full(v):
                return recompute.shape_source(self.program, v) if self.shape else "()"
        dims = []
        for d, size in enumerate(self.shape):
            source = next((v for v in values if d in self.varying(v) and d not in self.stretchable(v)), None)
            if source is None and (size != 1 or d in self.symbolic):  # a size no value gives
                return f"torch.broadcast_shapes({', '.join(recompute.shape_source(self.program, v) for v in values)})"
            lead = len(self.shape) - len(self.program.values[source].shape) if source else 0
            dims.append(recompute.size_source(self.program, source, d - lead) if source else "1")
        return tuple_source(dims)

    def strided_args(self, value: str, shape: str, local: str, expr: str | None = None,
                     beside: str = "an output", check: bool = True) -> tuple[list[str], list[str]]:
        """(forward lines, kernel arguments) passing `value` with its own strides, one per dim of
        the shape (0 for the dims it lacks), after a check of its shape against `shape` (a
        forward expression of the broadcast shape): a call at other sizes than the module was
        converted for must raise, not read out of bounds (a parameter beside a wider input);
        none where `check` is false (`shape` was computed from this value's).
        `local`: a name for it in forward when its expression (`expr`, else the program's) is not
        a plain name; `beside`: what has the broadcast shape, in the message."""
        e = expr or self.program.expr(value)
        lines = []
        if not e.isidentifier():
            lines.append(f"{local} = {e}")
        named = e if e.isidentifier() else local
        sizes = self.program.values[value].shape
        lead, varying = len(self.shape) - len(sizes), self.varying(value)
        if self.stretchable(value):
            # `expand` gives a size that stays 1 stride 0 and checks the dims the kernel reads; the
            # others must be 1 (the kernel never reads along them)
            fixed = [d - lead for d in range(lead, len(self.shape)) if d not in varying]
            if fixed:
                lines += shape_check(e, named, tuple_source([f"{named}.shape[{d}]" for d in fixed]),
                                     tuple_source(["1"] * len(fixed)), shape, beside,
                                     f"size 1 along dims {tuple(fixed)}")
            return lines, [f"{named}.expand({shape})", f"*{named}.expand({shape}).stride()"]
        want = tuple_source([f"{shape}[{d}]" if d in varying else "1" for d in range(lead, len(self.shape))])
        if check:
            lines += shape_check(e, named, f"{named}.shape", want, shape, beside)
        return lines, [named] + ["0"] * lead + ([f"*{named}.stride()"] if sizes else [])


def shape_check(expr: str, named: str, got: str, want: str, shape: str, beside: str = "an output",
                wanted: str | None = None) -> list[str]:
    """Forward lines raising a clear ValueError where `got` (sizes of the tensor `named`, written
    `expr` in the message) is not `want`, beside `beside` of shape `shape` (forward expressions)."""
    name = expr.replace('"', "'").replace("{", "{{").replace("}", "}}")  # inside an f-string
    return [f"if {got} != {want}:",
            f"    raise ValueError(f\"{name} has shape {{tuple({named}.shape)}} where this module reads one of "
            f"{wanted or f'shape {{tuple({want})}}'} beside {beside} of {{tuple({shape})}} (convert it again with inputs "
            "shaped as you call it)\")"]


def aligned_symbolic(program: Program, value: str, rank: int) -> set[int]:
    """A value's symbolic dims as dims of a shape of `rank` it broadcasts to (aligned right)."""
    v = program.values[value]
    return {rank - len(v.shape) + d for d in v.symbolic}


class PointwiseBlock:
    """A chain (a small DAG) of elementwise nodes over one output shape."""

    def __init__(self, program: Program, nodes: list[Node], shape: list[int], known: set[str] = frozenset(),
                 reserved: set[str] = frozenset(), wanted: tuple[str, ...] = ()):
        """`known`: values the template already holds in registers (the anchor's result);
        `reserved`: kernel parameter names the template uses itself; `wanted`: values the
        template reads from the block besides what its nodes compute (a reduction's input that
        is recomputed: the block computes it, with no node of its own)."""
        self.program = program
        self.nodes = nodes
        self.shape = list(shape)
        produced = {o for n in nodes for o in n.outputs}
        # tensor operands to load: inputs of the nodes not produced inside and not `known`
        self.operands: list[str] = []
        # index arithmetic and reads through it, computed here (`recompute`) rather than loaded
        self.recomputed: list[str] = []
        # sizes computed in forward (x.shape[0] in a traced `/ x.size(0)`): scalar kernel arguments
        self.scalars: list[str] = []
        self.recomputed += [v for v in wanted if v not in produced and program.is_recomputed(v)]
        for n in nodes:
            for v in program.inputs_of(n):
                if v in produced or v in known or v in self.operands or v in self.scalars or v in self.recomputed:
                    continue
                if program.is_recomputed(v):
                    self.recomputed.append(v)
                elif program.is_tensor(v):
                    self.operands.append(v)
                elif program.values[v].kind == "node":
                    self.scalars.append(v)
        # tensors the recomputed values read at computed positions: each with all its strides
        self.gathered: list[str] = recompute.gathered(program, self.recomputed)
        # the output's symbolic dims (the batch), from every value the block computes or reads
        # (aligned right: each broadcasts to the output)
        symbolic = {d for v in [*produced, *self.operands, *self.recomputed, *known] if v in program.values
                    for d in aligned_symbolic(program, v, len(self.shape))}
        self.broadcast = Broadcast(program, self.shape, symbolic)
        # kernel-side names of the operands: readable, and clear of the template's own
        self.local: dict[str, str] = {}
        taken = {r.removesuffix("_ptr") for r in reserved}
        self.gathered_local: dict[str, str] = {}
        for v, naming in [(v, self.local) for v in self.operands + self.scalars] + \
                [(v, self.gathered_local) for v in self.gathered]:
            expr = program.expr(v).replace("self.", "")
            base = re.sub(r"\W+", "_", expr if len(expr) <= 40 else v).strip("_") or "t"  # net[0].w -> net_0_w
            name, i = base, 1
            while name in taken:
                name, i = f"{base}_{i}", i + 1
            taken.add(name)
            naming[v] = name

    # -- kernel side -------------------------------------------------------------------------
    def full(self, value: str) -> bool:
        """An operand read at the flat offset, no index math: of the output's own shape and laid
        out as it is (made contiguous in forward, where it is already). A view that may reorder
        its tensor's elements (a transpose, a slice along an inner dim) is read through its
        strides instead, as a broadcast operand is: no copy before the kernel."""
        return self.broadcast.full(value) and not reorders(self.program, value)

    def varying(self, value: str) -> list[int]:
        """The output dimensions along which a broadcast operand changes."""
        return self.broadcast.varying(value)

    def params(self) -> list[str]:
        out = []
        for v in self.operands:
            p = self.local[v]
            out.append(f"{p}_ptr")
            if not self.full(v):
                out += [f"{p}_s{d}" for d in range(len(self.shape))]
        for v in self.gathered:
            p = self.gathered_local[v]
            out += [f"{p}_ptr"] + [f"{p}_s{d}" for d in range(len(self.program.values[v].shape))]
        return out + [self.local[v] for v in self.scalars]

    def emit(self, space: IndexSpace, env: dict[str, str]) -> list[str]:
        """Lines computing every node; `env` maps values already in registers to variables and
        receives the new ones."""
        lines: list[str] = []
        env.update({v: self.local[v] for v in self.scalars})
        for v in self.operands:
            p = self.local[v]
            var = f"{p}_val"
            if self.full(v):
                lines.append(f"{var} = tl.load({p}_ptr + {space.flat}, mask={space.mask}, other=0.0)")
                env[v] = var
                continue
            # broadcast dimensions have stride 0: only the others take part in the offset
            dims = self.varying(v)
            offset = " + ".join(f"{space.index(d)} * {p}_s{d}" for d in dims) or "0"
            if all(space.axes_of(d).scalar for d in dims):  # one value per program
                lines.append(f"{var} = tl.load({p}_ptr + {offset})")
            else:
                lines.append(f"{var} = tl.load({p}_ptr + {offset}, mask={space.mask}, other=0.0)")
            env[v] = var
        if self.recomputed:
            # its variables named after the block's first value, apart from another block's in the
            # same kernel (a norm's prologue and epilogue)
            first = next((o for n in self.nodes for o in n.outputs), "block")
            coords = frozenset(space.index(d) for d in range(len(self.shape)))
            evaluator = recompute.Evaluator(self.program, self.gathered_local, space.mask, f"({space.flat}) * 0",
                                            f"{self.program.expr(first) if first in self.program.values else first}_r",
                                            coords)
            for v in self.recomputed:
                dims = self.varying(v)
                idx = [space.index(d) if d in dims else "0" for d in range(len(self.shape))]
                env[v] = evaluator.broadcast(evaluator.at(v, recompute.aligned(self.program, v, idx)))
            lines += evaluator.lines
        for n in self.nodes:
            var = self.program.expr(n.outputs[0])
            lines.append(f"{var} = {self.expression(n, env)}")
            env[n.outputs[0]] = var
        return space.lines + lines

    def expression(self, node: Node, env: dict[str, str]) -> str:
        return node_expression(self.program, node, env)

    def reach(self, limit: int) -> list[str]:
        """Forward expressions of the tensors the kernel reads through their strides that may
        hold more than `limit` elements (traced so, or sized by the batch): a small output may
        read into such a tensor (the last token's logits of a long sequence), and its offsets
        then need 64 bits too."""
        values = [v for v in self.operands if not self.full(v)] + self.gathered
        return [self.program.expr(v) for v in values
                if self.program.values[v].symbolic or math.prod(self.program.values[v].shape) > limit]

    # -- launcher side -----------------------------------------------------------------------
    def shape_source(self) -> str:
        """The output's shape as forward computes it from the operands, before the output exists."""
        return self.broadcast.shape_source(self.operands + self.recomputed)

    def device(self) -> str:
        """Where the block's tensors live, as a forward expression."""
        tensors = self.operands + self.gathered
        return f"{self.program.expr(tensors[0])}.device" if tensors else self.program.device()

    def launch_args(self, shape: str, made_from: str | None = None) -> tuple[list[str], list[str]]:
        """(lines before the launch, argument expressions) for the operands, broadcast to
        `shape` (a forward expression such as `out.shape`): one of the output's shape made
        contiguous, the others with their own strides, each after a check of its shape but the
        one whose shape `made_from` is (the expression `shape` was computed from)."""
        prelude, args = [], []
        for v in self.operands:
            local = f"_{self.local[v]}"
            if self.full(v):
                e = self.program.expr(v)
                prelude.append(f"{local} = {e}.contiguous()")
                if f"{e}.shape" != made_from:  # read flat: a smaller one would be read past its end
                    prelude += shape_check(e, local, f"{local}.shape", shape, shape)
                args.append(local)
                continue
            # (no check where the shape came from it, unless a dim it does not vary along, a
            # static size of 1, could be another size in that shape: then it must stay 1)
            made_here = f"{self.program.expr(v)}.shape" == made_from and len(self.varying(v)) == len(self.shape)
            lines, strided = self.broadcast.strided_args(v, shape, local, check=not made_here)
            prelude += lines
            args += strided
        for v in self.gathered:  # read at computed positions: every dim checked, all strides passed
            e = self.program.expr(v)
            named = e if e.isidentifier() else f"_{self.gathered_local[v]}"
            if named != e:
                prelude.append(f"{named} = {e}")
            args += [named, f"*{named}.stride()"]
            if self.program.values[v].kind in ("param", "buffer"):
                continue  # the module's own: its sizes are the converted ones (as a conv's weight)
            sizes = recompute.gathered_check(self.program, v, self.recomputed, shape, len(self.shape))
            dims = tuple(d for d, _ in sizes)
            want = tuple_source([size for _, size in sizes])
            prelude += shape_check(e, named, tuple_source([f"{named}.shape[{d}]" for d in dims]), want, shape,
                                   wanted=f"sizes {{{want}}} along dims {dims}")
        fixed = recompute.fixed_sizes(self.program, self.recomputed, len(self.shape))
        if fixed:  # positions computed for these sizes: the output must have them
            dims = sorted(fixed)
            got = tuple_source([f"{shape}[{d}]" for d in dims])
            want = tuple_source([str(fixed[d]) for d in dims])
            prelude += [f"if {got} != {want}:",
                        f"    raise ValueError(f\"the output has shape {{tuple({shape})}} where this module computes "
                        f"positions for sizes {want} along dims {tuple(dims)} (convert it again with inputs shaped "
                        "as you call it)\")"]
        return prelude, args + [self.program.expr(v) for v in self.scalars]


#: views whose elements need not be their tensor's, in order
_REORDERING = {"aten.permute.default", "aten.transpose.int", "aten.t.default", "aten.numpy_T.default",
               "aten.movedim.int", "aten.select.int", "aten.slice.Tensor", "aten.narrow.default",
               "aten.diagonal.default", "aten.as_strided.default", "aten.unfold.default"}
#: views that keep their tensor's layout, strided or not (a copy, `contiguous`, ends the search)
_SHAPE_ONLY = {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.unsqueeze.default",
               "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.flatten.using_ints",
               "aten.unflatten.int", "aten.alias.default", "aten.detach.default", "aten.view_as.default",
               "aten.reshape_as.default"}


def reorders(program: Program, value: str) -> bool:
    """Whether `value` is a view that may not be its tensor's elements in order (a transpose, a
    slice along an inner dim), through any shape-only views and leading slices of it."""
    node = program.producer.get(value)
    while node is not None and (node.target in _SHAPE_ONLY or node.target in _REORDERING):
        ins = [v for v in program.inputs_of(node) if program.is_tensor(v)]
        if node.target in _REORDERING and not _in_order(program, node, ins):
            return True
        node = program.producer.get(ins[0]) if ins else None
    return False


def fast_dim(program: Program, value: str) -> int | None:
    """The dim along which `value` is laid out contiguously (stride 1), where it is a view
    through permutes, transposes, slices, selects and unsqueezes of a tensor laid out densely in
    order (what kernels write; inputs and parameters as usual): its last dim, permuted as the
    views permute it. Only speed depends on it (kernels read such views through their strides).
    None where a view in between could lay it out otherwise (a reshape of a transpose) or the
    contiguous dim was selected away."""
    node = program.producer.get(value)
    rank = len(program.values[value].shape)
    if node is None or (node.target not in _SHAPE_ONLY and node.target not in _REORDERING):
        return rank - 1 if rank else None
    ins = [v for v in program.inputs_of(node) if program.is_tensor(v)]
    if len(ins) != 1:
        return None
    inner, args = fast_dim(program, ins[0]), node.args
    in_rank = len(program.values[ins[0]].shape)
    if inner is None or not in_rank:
        return None
    if node.target == "aten.permute.default":
        dims = [d % in_rank for d in args[1]]
        return dims.index(inner)
    if node.target in ("aten.transpose.int", "aten.t.default", "aten.numpy_T.default"):
        a, b = (args[1] % in_rank, args[2] % in_rank) if node.target == "aten.transpose.int" else (0, 1)
        return b if inner == a else a if inner == b else inner
    if node.target in ("aten.slice.Tensor", "aten.alias.default", "aten.detach.default"):
        return inner
    if node.target == "aten.select.int":
        d = args[1] % in_rank
        return None if d == inner else inner - (d < inner)
    if node.target == "aten.unsqueeze.default":
        d = args[1] % (in_rank + 1)
        return inner + (d <= inner)
    # a reshape: its last dim is contiguous where its tensor's is (a reshape that cannot keep
    # that copies, contiguous); else it may merge the contiguous dim with another
    return rank - 1 if inner == in_rank - 1 else None


def _in_order(program: Program, node: Node, ins: list[str]) -> bool:
    """A slice or select that keeps its tensor's elements in order (along its leading dim, step
    1, whatever its bounds: `x[:n]` of a compaction's count too)."""
    args = node.args
    if node.target not in recompute.PICKS or len(ins) != 1 or len(args) < 2 or not isinstance(args[1], int):
        return False
    rank = len(program.values[ins[0]].shape)
    step = args[4] if node.target == "aten.slice.Tensor" and len(args) > 4 else 1
    return rank > 0 and isinstance(step, int) and recompute.in_order(program, ins[0], args[1] % rank, step)


def node_expression(program: Program, node: Node, env: dict[str, str]) -> str:
    """An elementwise node as a Triton expression of the variables `env` maps its inputs to."""
    op = VOCABULARY[node.op]
    if node.op == "clamp":  # an open side is +-inf: emit only the bounded side
        a = node.args[0]["value"]
        x = env[a] if a in env else _literal(program.values[a].literal)
        if not math.isinf(node.attrs["min"]):
            x = f"tl.maximum({x}, {_literal(node.attrs['min'])}{PROPAGATE_NAN})"
        if not math.isinf(node.attrs["max"]):
            x = f"tl.minimum({x}, {_literal(node.attrs['max'])}{PROPAGATE_NAN})"
        return x
    template = op.triton_expr(node.attrs)
    # operands by position; a number in a tensor's place (eq.Scalar(x, 0), where(c, x, 0.0)) is
    # written into the kernel
    fields = {}
    out = program.values.get(node.outputs[0])
    integral = out is not None and "int" in out.dtype
    for field, a in zip(("x", "y", "z"), node.args[:op.arity]):
        if isinstance(a, dict) and "value" in a:
            fields[field] = env[a["value"]] if a["value"] in env else _literal(program.values[a["value"]].literal, integral)
        else:
            fields[field] = _literal(a, integral)
    return template.format(**fields)
