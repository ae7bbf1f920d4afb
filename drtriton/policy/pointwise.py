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
from ..ops.operator import float_source
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


class PointwiseBlock:
    """A chain (a small DAG) of elementwise nodes over one output shape."""

    def __init__(self, program: Program, nodes: list[Node], shape: list[int], known: set[str] = frozenset(),
                 reserved: set[str] = frozenset()):
        """`known`: values the template already holds in registers (the anchor's result);
        `reserved`: kernel parameter names the template uses itself."""
        self.program = program
        self.nodes = nodes
        self.shape = list(shape)
        produced = {o for n in nodes for o in n.outputs}
        # tensor operands to load: inputs of the nodes not produced inside and not `known`
        self.operands: list[str] = []
        # sizes computed in forward (x.shape[0] in a traced `/ x.size(0)`): scalar kernel arguments
        self.scalars: list[str] = []
        for n in nodes:
            for v in program.inputs_of(n):
                if v in produced or v in known or v in self.operands or v in self.scalars:
                    continue
                if program.is_tensor(v):
                    self.operands.append(v)
                elif program.values[v].kind == "node":
                    self.scalars.append(v)
        # the output's symbolic dims (the batch), from every value the block computes or reads
        # (aligned right: each broadcasts to the output)
        self.out_symbolic = {d for v in [*produced, *self.operands, *known] if v in program.values
                         for d in self._aligned(v)}
        # kernel-side names of the operands: readable, and clear of the template's own
        self.local: dict[str, str] = {}
        taken = {r.removesuffix("_ptr") for r in reserved}
        for v in self.operands + self.scalars:
            expr = program.expr(v).replace("self.", "")
            base = re.sub(r"\W+", "_", expr if len(expr) <= 40 else v).strip("_") or "t"  # net[0].w -> net_0_w
            name, i = base, 1
            while name in taken:
                name, i = f"{base}_{i}", i + 1
            taken.add(name)
            self.local[v] = name

    # -- kernel side -------------------------------------------------------------------------
    def _aligned(self, value: str) -> set[int]:
        """A value's symbolic dims as dims of the output (aligned right)."""
        v = self.program.values[value]
        return {len(self.shape) - len(v.shape) + d for d in v.symbolic}

    def full(self, value: str) -> bool:
        """An operand of the output's own shape: read at the flat offset, no index math. A fixed
        size of 1 where the output's is symbolic (a weight beside a batch traced at 1) is not."""
        return list(self.program.values[value].shape) == self.shape and self._aligned(value) == self.out_symbolic

    def varying(self, value: str) -> list[int]:
        """The output dimensions along which a broadcast operand changes (as at capture: its
        size-1 and missing dimensions are broadcast, stride 0, and skipped; a symbolic size of 1
        is the batch traced at 1, so it changes)."""
        vs = list(self.program.values[value].shape)
        lead, sym = len(self.shape) - len(vs), self._aligned(value)
        return [d for d in range(len(self.shape)) if d >= lead and (vs[d - lead] != 1 or d in sym)
                and (self.shape[d] != 1 or d in self.out_symbolic)]

    def params(self) -> list[str]:
        out = []
        for v in self.operands:
            p = self.local[v]
            out.append(f"{p}_ptr")
            if not self.full(v):
                out += [f"{p}_s{d}" for d in range(len(self.shape))]
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
        for n in self.nodes:
            var = self.program.expr(n.outputs[0])
            lines.append(f"{var} = {self.expression(n, env)}")
            env[n.outputs[0]] = var
        return space.lines + lines

    def expression(self, node: Node, env: dict[str, str]) -> str:
        op = VOCABULARY[node.op]
        if node.op == "clamp":  # an open side is +-inf: emit only the bounded side
            a = node.args[0]["value"]
            x = env[a] if a in env else _literal(self.program.values[a].literal)
            if not math.isinf(node.attrs["min"]):
                x = f"tl.maximum({x}, {_literal(node.attrs['min'])})"
            if not math.isinf(node.attrs["max"]):
                x = f"tl.minimum({x}, {_literal(node.attrs['max'])})"
            return x
        template = op.triton_expr(node.attrs)
        # operands by position; a number in a tensor's place (eq.Scalar(x, 0), where(c, x, 0.0)) is
        # written into the kernel
        fields = {}
        out = self.program.values.get(node.outputs[0])
        integral = out is not None and "int" in out.dtype
        for field, a in zip(("x", "y", "z"), node.args[:op.arity]):
            if isinstance(a, dict) and "value" in a:
                fields[field] = env[a["value"]] if a["value"] in env else _literal(self.program.values[a["value"]].literal, integral)
            else:
                fields[field] = _literal(a, integral)
        return template.format(**fields)

    # -- launcher side -----------------------------------------------------------------------
    def shape_source(self) -> str:
        """The output's shape as forward computes it before the output exists: an operand's
        shape when one has the output's (the module then works at other sizes too), else each
        dim's size from an operand that varies along it (`torch.broadcast_shapes` costs the
        host 13 us a call on CPU)."""
        for v in self.operands:
            if self.full(v):
                return f"{self.program.expr(v)}.shape"
        dims = []
        for d, size in enumerate(self.shape):
            source = next((v for v in self.operands if d in self.varying(v)), None)
            if source is None and (size != 1 or d in self.out_symbolic):  # a size no operand gives
                return f"torch.broadcast_shapes({', '.join(f'{self.program.expr(v)}.shape' for v in self.operands)})"
            lead = len(self.shape) - len(self.program.values[source].shape) if source else 0
            dims.append(f"{self.program.expr(source)}.shape[{d - lead}]" if source else "1")
        return tuple_source(dims)

    def launch_args(self, shape: str) -> tuple[list[str], list[str]]:
        """(lines before the launch, argument expressions) for the operands, broadcast to
        `shape` (a forward expression such as `out.shape`). A broadcast operand goes with its
        own strides (the kernel reads them only along the dims it varies in; `expand` costs the
        host 1-2 us a call), 0 for the dims it lacks, after a check of its shape against the
        output's (0.2-0.5 us; `expand` checked too): a call at other sizes than the module was
        converted for must raise, not read out of bounds (a parameter beside a wider input)."""
        prelude, args = [], []
        for v in self.operands:
            e = self.program.expr(v)
            local = f"_{self.local[v]}"
            if self.full(v):
                prelude.append(f"{local} = {e}.contiguous()")
                args.append(local)
                continue
            # how the message names it (inside an f-string of the generated code)
            value, name = self.program.values[v], e.replace('"', "'").replace("{", "{{").replace("}", "}}")
            if not e.isidentifier():
                prelude.append(f"{local} = {e}")
                e = local
            lead = len(self.shape) - len(value.shape)
            varying = self.varying(v)
            want = [f"{shape}[{d}]" if d in varying else "1" for d in range(lead, len(self.shape))]
            want_src = tuple_source(want)
            prelude += [f"if {e}.shape != {want_src}:",
                        f"    raise ValueError(f\"{name} has shape {{tuple({e}.shape)}} where this module reads one of "
                        f"shape {{{want_src}}} beside an output of {{tuple({shape})}} (convert it again with inputs "
                        "shaped as you call it)\")"]
            args += [e] + ["0"] * lead + ([f"*{e}.stride()"] if value.shape else [])
        return prelude, args + [self.program.expr(v) for v in self.scalars]
