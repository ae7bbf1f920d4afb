"""Values recomputed where they are read instead of stored: index arithmetic and the reads
through it.

Upsampling, interpolation and position tables lower (Inductor's decompositions) to `arange`,
elementwise arithmetic on it, and advanced indexing at the positions it gives. Run as its own
fragments, that is a dozen small kernels storing vectors of a few dozen elements before the
one that does the work. As Inductor does, such values are recomputed in each kernel that reads
them: an `arange` is the element's index along one dimension, a shape-only view maps indices,
elementwise arithmetic is a line, and advanced indexing at recomputed positions is one load.
So is a read through stored integer ids (token embeddings, rows picked by an index tensor): the
id is loaded where the element is, then its row (Inductor's indirect loads), so a BERT's word,
position and token-type embeddings are summed in the layer norm's prologue, never stored.

An allocation filled with one number (`zeros_like(x)`, `torch.full(...)`, `x.new_ones(...)`)
is that number where it is read (Inductor's `full` lowering): `where(c, x, zeros_like(x))`
writes no tensor of zeros first. `zeros_like(x)` reads only x's sizes, not its data.

The same holds for `cat` read only elementwise (rotary embeddings' `cat((-x2, x1), -1)`,
concatenated features scaled or added): each element is its branch's input at a shifted index,
loaded under that branch's mask; the elementwise ops and the slices and selects feeding only
such cats (the `-x2`, the `x[..., :half]`) come along, a slice as an index map onto its tensor
(no view made in forward). Their stored inputs are loaded through their strides, as a read's
tensor is.

A node is *recomputed* (`recomputed_nodes`) when it is one of those, its tensor inputs are
recomputed too (a read's tensor and a cat's branches may be stored; a fill reads none: its
template, `x` of `zeros_like(x)`, only orders it after x, `gathered(shapes=True)`), and every
node that reads it can compute it in place: an elementwise node (through `PointwiseBlock`),
another recomputed node, or advanced indexing reading it as an index tensor (the gather
template). It then belongs to no fragment; `cone` gives the recomputed nodes a fragment reads, which a fragment run as
PyTorch (or posed as a problem alone) computes first.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..ops import VOCABULARY
from ..ops.elementwise import _TL_DTYPES
from ..ops.operator import float_source

ARANGES = {"aten.arange.default", "aten.arange.start", "aten.arange.start_step"}
# views that keep the elements' order: only size-1 dims come and go, mapped by the other sizes
RESHAPES = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.unsqueeze.default",
            "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.flatten.using_ints",
            "aten.unflatten.int", "aten.alias.default", "aten.clone.default", "aten.contiguous.default",
            "aten.detach.default", "aten.lift_fresh_copy.default", "aten.view_as.default", "aten.reshape_as.default"}
EXPANDS = {"aten.expand.default", "aten.expand_as.default"}
# views that pick along one dim: an index map a kernel reading them applies to their tensor
PICKS = {"aten.slice.Tensor", "aten.select.int"}
POINTWISE = {"elementwise_unary", "elementwise_binary"}
#: a recomputed value costs each kernel reading it its whole cone: past this many nodes, store it
MAX_CONE = 256
#: a recomputed cat loads every branch (masked) for each element: past this many, its template
MAX_CAT_BRANCHES = 4

_TL = {f"torch.{name}": tl for name, tl in _TL_DTYPES.items()}

#: allocations filled with one number: the number, or the position of the argument holding it
_FILLED_WITH = {"aten.zeros.default": 0, "aten.zeros_like.default": 0, "aten.new_zeros.default": 0,
                "aten.ones.default": 1, "aten.ones_like.default": 1, "aten.new_ones.default": 1}
_FILL_ARGUMENT = {"aten.full.default": 1, "aten.full_like.default": 1, "aten.new_full.default": 2}
#: fills shaped as their tensor input (read for its sizes alone), whatever those sizes are
SHAPED_AS_INPUT = {"aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default"}


def fill_value(node) -> int | float | bool | None:
    """The number an allocation is filled with (`zeros_like`, `full`, `new_ones`, ...), or None
    (another node, or a fill by a value forward computes)."""
    if node.target in _FILLED_WITH:
        return _FILLED_WITH[node.target]
    at = _FILL_ARGUMENT.get(node.target)
    value = node.args[at] if at is not None and len(node.args) > at else None
    return value if isinstance(value, (int, float, bool)) else None


def _data_inputs(program, node) -> list[str]:
    """The tensors whose elements `node` reads: none for a fill (`zeros_like(x)` reads only x's
    sizes, `x.new_ones(n)` its dtype and device)."""
    if fill_value(node) is not None:
        return []
    return [v for v in program.inputs_of(node) if program.is_tensor(v)]


def _fill_expression(value, dtype: str, zero: str) -> str:
    """`value` in the dtype of the fill, in the shape of the tile (`zero`: zeros of that shape,
    converted first, so a number beyond int32 meets an int64 tile)."""
    if dtype == "torch.bool":
        return f"({zero}) {'==' if value else '!='} 0"
    zeros = f"({zero}).to({_TL[dtype]})"
    if "float" not in dtype:
        return f"{zeros} + {int(value)}"
    if value == 0 and math.copysign(1.0, value) < 0:
        return f"{zeros} * -1.0"  # (-0.0: 0.0 + -0.0 is +0.0, and Triton negates as 0 - x)
    return f"{zeros} + {float_source(float(value))}"


@dataclass
class Read:
    """A read of tensor `x` at positions from index tensors: advanced indexing `x[i, :, j]`,
    `embedding` (weight[i]) and `index_select` alike. `entries`: per dim of x, its index
    tensor or None (a full slice); the index tensors broadcast to `b` dims standing in the
    output from dim `first` (where the indexed dims were when adjacent, else first)."""

    x: str
    entries: list  # value name or None, one per dim of x
    b: int
    first: int

    @property
    def indexed(self) -> list[int]:
        return [d for d, e in enumerate(self.entries) if e is not None]


def read_of(program, node) -> Read | None:
    """The node as a read at positions from index tensors, or None."""
    def value(a):
        return a["value"] if isinstance(a, dict) and "value" in a else None

    if node.op not in ("index", "embedding", "index_select") or node.target == "aten.index_put.default":
        return None
    x = value(node.args[0])
    if x is None or not program.is_tensor(x):
        return None
    rank = len(program.values[x].shape)
    if node.op == "index":
        entries = [value(e) for e in node.args[1]] + [None] * (rank - len(node.args[1]))
    elif node.op == "embedding":
        entries = [value(node.args[1]), None]
    elif rank == 0:  # index_select of a 0-d tensor (read as one element): not the layout below
        return None
    else:
        entries = [None] * rank
        entries[node.attrs["dim"]] = value(node.args[2])
    indexed = [d for d, e in enumerate(entries) if e is not None]
    if not indexed or any(not program.is_tensor(entries[d]) for d in indexed):
        return None
    if node.op == "index_select" and len(program.values[entries[indexed[0]]].shape) != 1:
        return None  # a 0-d position keeps its dim: not the layout below
    b = max(len(program.values[entries[d]].shape) for d in indexed)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    return Read(x, entries, b, indexed[0] if adjacent else 0)


@dataclass
class Pick:
    """A slice (`x[..., start::step]`, `index` None) or select (`x[..., index]`) along `dim` of
    `x`, whose size there is static."""

    x: str
    dim: int
    start: int = 0
    step: int = 1
    index: int | None = None
    whole: bool = False  # x[:, :] along a dim of any size (a batch's): no size fixed there

    def source_index(self, idx: list[str]) -> list[str]:
        """The indices of x for the element of the view at `idx`."""
        d = self.dim
        if self.index is not None:
            return idx[:d] + [str(self.index)] + idx[d:]
        at = idx[d] if self.step == 1 else f"{idx[d]} * {self.step}"
        return idx[:d] + [f"({at} + {self.start})" if self.start else at] + idx[d + 1:]


_END = 2 ** 63 - 1  # a slice to the end, as captured


def pick_of(program, node) -> Pick | None:
    """The node as a Pick, or None (a size or bound that is not a number, a symbolic dim)."""
    args = node.args
    x = args[0]["value"] if args and isinstance(args[0], dict) and "value" in args[0] else None
    if x is None or not program.is_tensor(x) or node.outputs[0] not in program.values:
        return None
    xv, out = program.values[x], program.values[node.outputs[0]]
    if out.dtype not in _TL or len(args) < 2 or not isinstance(args[1], int) or not xv.shape:
        return None
    d = args[1] % len(xv.shape)
    if node.target == "aten.slice.Tensor" and args[2:] in ([], [0], [None], [0, _END], [None, _END], [0, _END, 1]):
        return Pick(x, d, whole=True)
    if d in xv.symbolic or xv.shape[d] is None or (node.target == "aten.slice.Tensor" and d in out.symbolic) or \
            any(not isinstance(a, (int, type(None))) for a in args[2:]):  # (a bound forward computes)
        return None
    size = xv.shape[d]
    if node.target == "aten.select.int":
        i = args[2] if len(args) > 2 else None
        return Pick(x, d, index=i % size) if isinstance(i, int) and -size <= i < size else None
    start, step = (args[2] if len(args) > 2 else 0), (args[4] if len(args) > 4 else 1)
    if start is None:
        start = 0
    if not isinstance(start, int) or not isinstance(step, int) or step < 1:
        return None
    start = min(max(start + size if start < 0 else start, 0), size)
    return Pick(x, d, start, step)


def keeps_order(program, pick: Pick) -> bool:
    """Whether the view is its tensor's elements in order, a contiguous run of them where the
    tensor is contiguous (a slice along the first dim of more than one element, the whole
    tensor): a kernel reads it flat, with no index arithmetic."""
    return pick.whole or in_order(program, pick.x, pick.dim, pick.step)


def in_order(program, x: str, dim: int, step: int) -> bool:
    """Whether picking along `dim` of `x` with `step` keeps x's elements in order: a step of 1
    along its leading dim (past static sizes of 1), whatever the bounds."""
    xv = program.values[x]
    return step == 1 and all(s == 1 for s in xv.shape[:dim]) and not any(d in xv.symbolic for d in range(dim))


def _arange_start_step(node) -> tuple | None:
    """An arange's start and step when both are numbers (its length is its output's size)."""
    args = node.args
    start, step = {"aten.arange.default": (0, 1), "aten.arange.start": (args[0], 1),
                   "aten.arange.start_step": (args[0], args[2] if len(args) > 2 else None)}[node.target]
    return (start, step) if _number(start) and _number(step) else None


def _static(value) -> bool:
    return not value.symbolic and None not in value.shape


def _non_one(shape) -> list[int]:
    return [s for s in shape if s != 1]


def _number(a) -> bool:
    return isinstance(a, (int, float)) and not isinstance(a, bool)


def _parameter(program, value: str) -> bool:
    """A module's parameter or buffer: stored, the same at every call."""
    return program.values[value].kind in ("param", "buffer")


class _Kinds:
    """Which nodes could be recomputed: "position" (a function of the element's position alone),
    "read" (it reads a stored tensor's data) or "parameter" (elementwise arithmetic and reshapes
    on parameters and buffers alone: a batch norm's scale and shift, Gemma's `1 + w`, loaded and
    computed where read instead of a kernel of their own before)."""

    def __init__(self, program):
        self.program = program
        self.candidate: dict[str, str] = {}  # value -> "position" | "read" (reads a tensor's data)
        for n in program.nodes:
            kind = self._kind(n)
            if kind is not None:
                self.candidate[n.outputs[0]] = kind
        # cats, and the elementwise nodes feeding only them: evaluated at shifted indices, with
        # stored inputs loaded through their strides (the other candidates read recomputed ones)
        self.shifted: set[str] = set()
        for n in reversed(program.nodes):  # (users first: a cat before the `-x2` it reads)
            if n.outputs and n.outputs[0] not in self.candidate and self._shifted(n):
                self.shifted.add(n.name)
                self.candidate[n.outputs[0]] = "read"

    def _shifted(self, n) -> bool:
        program = self.program
        if len(n.outputs) != 1 or n.outputs[0] not in program.values or n.mutates:
            return False
        out = program.values[n.outputs[0]]
        if out.dtype not in _TL:
            return False
        ins = [v for v in program.inputs_of(n) if program.is_tensor(v)]
        users = program.users.get(n.outputs[0], [])
        if n.target in PICKS:  # (only a shifted node or another pick reads it: no view made in forward)
            return pick_of(program, n) is not None and bool(users) and all(
                u.name in self.shifted or (u.target in PICKS and u.outputs[0] in self.candidate) for u in users)
        if n.op == "cat":
            d = n.attrs.get("dim")
            return isinstance(d, int) and d not in out.symbolic and 2 <= len(ins) <= MAX_CAT_BRANCHES and \
                len(ins) == len(n.args[0]) and all(
                    len(program.values[v].shape) == len(out.shape) and d not in program.values[v].symbolic for v in ins)
        return n.op is not None and VOCABULARY[n.op].category in POINTWISE and \
            VOCABULARY[n.op].triton_template is not None and bool(ins) and bool(users) and \
            all(u.name in self.shifted for u in users) and \
            not any(program.values[v].kind == "node" for v in program.inputs_of(n) if not program.is_tensor(v))

    def _inputs_recomputable(self, node) -> bool:
        ins = [v for v in self.program.inputs_of(node) if self.program.is_tensor(v)]
        return bool(ins) and all(v in self.candidate for v in ins)

    def _kind(self, n) -> str | None:
        program = self.program
        if len(n.outputs) != 1 or n.outputs[0] not in program.values or n.mutates:
            return None
        out = program.values[n.outputs[0]]
        if fill_value(n) is not None:  # (a `*_like` fill's sizes are its input's, whatever they are)
            fits = out.dtype in _TL and (_static(out) or n.target in SHAPED_AS_INPUT)
            return "position" if fits else None
        if n.target in ARANGES:
            fits = _static(out) and len(out.shape) == 1 and out.dtype in _TL
            return "position" if fits and _arange_start_step(n) is not None else None
        if n.target in PICKS:  # an index map onto its tensor, read through its strides
            pick = pick_of(program, n)
            if pick is None or keeps_order(program, pick):
                return None  # (read flat as it is: no index arithmetic)
            if self.candidate.get(pick.x) == "position":
                return "position" if _static(out) else None
            return "read"
        if n.target in RESHAPES or n.target in EXPANDS:
            ins = [v for v in program.inputs_of(n) if program.is_tensor(v)]
            if len(ins) == 1 and _static(out) and (_parameter(program, ins[0]) or
                                                   self.candidate.get(ins[0]) == "parameter"):
                src = program.values[ins[0]]
                return "parameter" if _non_one(src.shape) == _non_one(out.shape) else None
            if len(ins) != 1 or self.candidate.get(ins[0]) != "position" or not _static(out):
                return None
            src = program.values[ins[0]]
            same_order = _non_one(src.shape) == _non_one(out.shape)
            broadcast = n.target in EXPANDS and len(src.shape) <= len(out.shape) and all(
                s in (1, o) for s, o in zip(src.shape, out.shape[len(out.shape) - len(src.shape):]))
            return "position" if same_order or broadcast else None
        if n.op is not None and VOCABULARY[n.op].category in POINTWISE and VOCABULARY[n.op].triton_template is not None:
            ins = [v for v in program.inputs_of(n) if program.is_tensor(v)]
            if ins and _static(out) and out.dtype in _TL and all(
                    _parameter(program, v) or self.candidate.get(v) == "parameter" for v in ins) and \
                    not any(program.values[v].kind == "node" for v in program.inputs_of(n) if not program.is_tensor(v)):
                return "parameter"
            if not self._inputs_recomputable(n):
                return None
            # other inputs: numbers written into the kernel (a size forward computes would be an argument)
            if any(program.values[v].kind == "node" for v in program.inputs_of(n) if not program.is_tensor(v)):
                return None
            reads = any(self.candidate[v] == "read" for v in program.inputs_of(n) if program.is_tensor(v))
            return "read" if reads else ("position" if _static(out) else None)
        read = read_of(program, n)
        if read is not None:
            xv = program.values[read.x]
            if None in xv.shape or any(d in xv.symbolic for d in read.indexed):
                return None
            # positions computed (an arange's arithmetic) or stored (token ids: loaded where the
            # element is, as Inductor's indirect loads read them)
            def positions(e) -> bool:
                kind = self.candidate.get(e)
                return kind == "position" or (kind is None and _stored_index(program, e))

            if not all(positions(read.entries[d]) for d in read.indexed):
                return None
            if read.x in self.candidate:  # a table that is itself position arithmetic (linspace)
                return "position" if self.candidate[read.x] == "position" and _static(out) else None
            return "read"
        return None


def recomputed_nodes(program) -> set[str]:
    """The names of the nodes recomputed by the kernels that read them (see the module's doc)."""
    kinds = _Kinds(program)
    recomputed = {n.name for n in program.nodes if n.outputs and n.outputs[0] in kinds.candidate}
    outputs = program.roots
    changed = bool(recomputed)
    while changed:  # dropping a node may leave its inputs or its users unable to recompute
        before = set(recomputed)
        for n in reversed(program.nodes):  # every reader computes it in place
            users = program.users.get(n.outputs[0], []) if n.outputs else []
            if n.name in recomputed and (n.outputs[0] in outputs or not users or not all(
                    _reads_in_place(program, kinds, u, n.outputs[0], recomputed) for u in users)):
                recomputed.discard(n.name)
        for n in program.nodes:  # its inputs are recomputed too (a read's tensor is stored, but
            if n.name not in recomputed:  # a table of positions is computed there; a cat's
                continue  # branches may be either)
            read = read_of(program, n)
            # a read's tensor, and its index tensors, may be stored (loaded where read)
            stored = {read.x, *(read.entries[d] for d in read.indexed)} \
                if read is not None and kinds.candidate[n.outputs[0]] == "read" else set()
            if kinds.candidate[n.outputs[0]] == "parameter":  # its parameters are loaded where read
                stored |= {v for v in program.inputs_of(n) if program.is_tensor(v) and _parameter(program, v)}
            if n.target in PICKS and kinds.candidate[n.outputs[0]] == "read":  # its tensor likewise
                stored.add(pick_of(program, n).x)
            ins = [v for v in _data_inputs(program, n) if v not in stored and n.name not in kinds.shifted]
            if fill_value(n) is not None and any(_made_by(program, v, recomputed) for v in program.inputs_of(n)):
                recomputed.discard(n.name)  # shaped as a recomputed value, which forward never makes
                continue
            if any(not _made_by(program, v, recomputed) for v in ins) or \
                    len(cone(program, [n.outputs[0]], recomputed)) > MAX_CONE:
                recomputed.discard(n.name)
        changed = recomputed != before
    return recomputed


def _reads_in_place(program, kinds: _Kinds, user, value: str, recomputed: set[str]) -> bool:
    if user.name in kinds.shifted and any(read_of(program, n) for n in cone(program, [value], recomputed)):
        return False  # a read at computed positions under shifted indices: stored (see gathered_check)
    if user.name in recomputed:
        return True
    if program.producer[value].name in kinds.shifted and program.producer[value].op != "cat":
        return False  # it came along with a cat that is stored after all: then it is stored too
    if user.op is not None and VOCABULARY[user.op].category in POINTWISE and VOCABULARY[user.op].triton_template is not None:
        return True
    if kinds.candidate[value] == "position" and value in _index_arguments(program, user):
        return True  # an index tensor the gather template computes
    return reduction_reads_in_place(program, user, value)


def reduction_reads_in_place(program, user, value: str) -> bool:
    """Whether a reduction or softmax reads `value` as its input computed as it loads it (an
    embedding mean-pooled, an interpolation summed): a float input the rows template can compute
    (`rows.computes_input`)."""
    from .emit.rows import computes_input  # (the emitters import this module)

    ins = program.inputs_of(user)
    v = program.values[value]
    return user.op is not None and bool(ins) and ins[0] == value and v.dtype in ("torch.float32", "torch.float64") \
        and computes_input(user.op, user.attrs, len(v.shape))


def _index_arguments(program, node) -> list[str]:
    """The index tensors of a read at positions (not the tensor read), or none."""
    if node.op in ("gather", "index_select") and len(node.args) > 2 and isinstance(node.args[2], dict):
        return [node.args[2]["value"]] if node.args[0] != node.args[2] else []
    read = read_of(program, node)
    return [e for e in read.entries if e is not None and e != read.x] if read is not None else []


def cone(program, values: list[str], recomputed: set[str] | None = None) -> list:
    """The recomputed nodes computing `values` (those of them that are recomputed), in the
    program's order."""
    recomputed = program.recomputed if recomputed is None else recomputed
    need, seen = list(values), set()
    while need:
        v = need.pop()
        prod = program.producer.get(v)
        if prod is None or prod.name not in recomputed or prod.name in seen:
            continue
        seen.add(prod.name)
        need += program.inputs_of(prod)
    return [n for n in program.nodes if n.name in seen]


def gathered(program, values: list[str], shapes: bool = False) -> list[str]:
    """The stored tensors that recomputing `values` reads (through computed positions or shifted
    indices), in order; with `shapes`, those whose sizes, dtype or device it takes too (`x` of a
    recomputed `zeros_like(x)`: never read, but forward must have made it first)."""
    out = []
    for n in cone(program, values):
        ins = [v for v in program.inputs_of(n) if program.is_tensor(v)] if shapes else _data_inputs(program, n)
        for v in ins:
            if v not in out and not _made_by(program, v, program.recomputed):
                out.append(v)
    return out


def _stored_index(program, value: str) -> bool:
    """An integer tensor of known sizes that no candidate computes: read where it is needed."""
    v = program.values.get(value)
    return v is not None and v.dtype in ("torch.int64", "torch.int32") and None not in v.shape


def _made_by(program, value: str, recomputed: set[str]) -> bool:
    prod = program.producer.get(value)
    return prod is not None and prod.name in recomputed


def shape_exprs(program, value: str) -> list[str]:
    """A recomputed value's sizes as forward expressions: numbers where static, else the size of
    the tensor an index read takes that dimension from. Kept per program (`recomputed_sizes`):
    each size follows an input's, and a deep cone of slices and arithmetic (a volume's grid
    sampled at its three coordinates) would otherwise be walked once per path through it."""
    memo = getattr(program, "recomputed_sizes", None)
    if memo is None:
        return _shape_exprs(program, value)
    if value not in memo:
        memo[value] = _shape_exprs(program, value)
    return list(memo[value])


def _shape_exprs(program, value: str) -> list[str]:
    v = program.values[value]
    node = program.producer[value]
    read = read_of(program, node)
    if not v.symbolic:
        return [str(s) for s in v.shape]
    if read is not None:
        xe = program.expr(read.x)
        kept = [f"{xe}.shape[{d}]" for d in range(len(read.entries)) if d not in read.indexed]
        first, b = read.first, read.b
        block = [str(s) for s in v.shape[first:first + b]]
        for j in range(b):  # a symbolic one from an index tensor varying along it (aligned right)
            if first + j in v.symbolic:
                for e in (read.entries[d] for d in read.indexed):
                    ev = program.values[e]
                    k = j - (b - len(ev.shape))
                    if k >= 0 and (ev.shape[k] != 1 or k in ev.symbolic):
                        block[j] = size_source(program, e, k)
                        break
        return kept[:first] + block + kept[first:]
    rank = len(v.shape)
    out = []
    ins = [a for a in program.inputs_of(node) if program.is_tensor(a)]
    for d, size in enumerate(v.shape):  # an elementwise node: the dim from an input varying along it
        source = "1" if size == 1 and d not in v.symbolic else None
        if node.op == "cat" and d == node.attrs["dim"]:
            source = str(size)  # (static: see _Kinds._shifted)
        if node.target in PICKS:  # the size of x along the dim it stands for, or its own where picked
            pick = pick_of(program, node)
            e = d + (pick.index is not None and d >= pick.dim)
            picked = e == pick.dim and pick.index is None and not pick.whole
            source = str(size) if picked else size_source(program, pick.x, e)
        for a in ins:
            av = program.values[a]
            e = d - (rank - len(av.shape))
            if source is None and e >= 0 and (av.shape[e] != 1 or e in av.symbolic):
                source = size_source(program, a, e)
        out.append(source or str(size))
    return out


def shape_source(program, value: str) -> str:
    """A tensor's shape as forward writes it: `x.shape`, or a recomputed value's sizes (it is
    never stored)."""
    if _made_by(program, value, program.recomputed):
        return _tuple(shape_exprs(program, value))
    return f"{program.tensor_expr(value)}.shape"


def size_source(program, value: str, d: int) -> str:
    """Its size along dim d, as forward writes it."""
    if _made_by(program, value, program.recomputed):
        return shape_exprs(program, value)[d]
    return f"{program.tensor_expr(value)}.shape[{d}]"


def aligned(program, value: str, idx: list[str]) -> list[str]:
    """`value`'s indices, given those of a shape it broadcasts to (aligned right): a size-1 dim
    is read at 0 (a symbolic one is the batch traced at 1: it follows)."""
    v = program.values[value]
    lead = len(idx) - len(v.shape)
    return [idx[lead + d] if (s != 1 or d in v.symbolic) else "0" for d, s in enumerate(v.shape)]


class Evaluator:
    """Kernel lines computing recomputed values at given indices. `local` names the kernel
    parameters of each tensor read through computed positions (`{local}_ptr`, `{local}_s{d}`);
    `mask` and `zero` (a block of zeros of the tile's shape) come from the template.

    `coords`: the tile's own index expressions. A parameter or buffer read at them alone (a
    batch norm's statistics at the channel) is loaded in the shape of those indices, masked by
    its sizes, not in the tile's: what is computed from it runs once per channel column (or once
    per program, at a scalar index), not once per element. `broadcast` gives such a value back in
    the tile's shape."""

    def __init__(self, program, local: dict[str, str], mask: str, zero: str, prefix: str = "_r",
                 coords: frozenset[str] = frozenset()):
        self.program = program
        self.local = local
        self.mask, self.zero = mask, zero
        self.prefix = prefix
        self.coords = coords
        self.lines: list[str] = []
        self._memo: dict[tuple, str] = {}
        self._narrow: set[str] = set()  # loads in the indices' shape, and variables computed from them

    def at(self, value: str, idx: list[str]) -> str:
        """A kernel variable holding `value` at indices `idx` (one per dim of `value`)."""
        key = (value, tuple(idx), self.mask)
        if key not in self._memo:
            if _made_by(self.program, value, self.program.recomputed):
                expr = self._expression(self.program.producer[value], value, idx)
            else:  # a stored input of a cat's branch (or what feeds one)
                expr = self._load(value, idx)
            if not expr.isidentifier():  # (a view is its source's variable)
                var = f"{self.prefix}{len(self.lines)}"
                self.lines.append(f"{var} = {expr}")
                if expr in self._narrow or self._narrow & set(re.findall(r"\w+", expr)):
                    self._narrow.add(var)
                expr = var
            self._memo[key] = expr
        return self._memo[key]

    def broadcast(self, var: str) -> str:
        """`var` (from `at`) in the tile's shape."""
        if var not in self._narrow:
            return var
        name = f"{var}_b"
        line = f"{name} = ({var} + {self.zero}).to({var}.dtype)"  # (an int8 value stays int8: it wraps)
        if line not in self.lines:
            self.lines.append(line)
        return name

    def _expression(self, node, value: str, idx: list[str]) -> str:
        program = self.program
        out = program.values[value]
        if (value_filled := fill_value(node)) is not None:
            return _fill_expression(value_filled, out.dtype, self.zero)
        if node.target in ARANGES:
            start, step = _arange_start_step(node)
            # (PyTorch computes a float arange in a wider type and rounds once: at most an ulp apart)
            i = f"{idx[0]}.to({_TL[out.dtype]})" if idx[0] != "0" else "0"
            if "float" in out.dtype:
                start, step = float(start), float(step)
            return f"({i} * {step!r} + {start!r})"
        if node.target in RESHAPES or node.target in EXPANDS:
            src = next(v for v in program.inputs_of(node) if program.is_tensor(v))
            sv = program.values[src]
            if _non_one(sv.shape) == _non_one(out.shape):
                kept = iter(i for i, s in zip(idx, out.shape) if s != 1)
                return self.at(src, [next(kept) if s != 1 else "0" for s in sv.shape])
            return self.at(src, aligned(program, src, idx))
        read = read_of(program, node)
        if read is not None:
            return self._read(read, idx)
        if node.op == "cat":
            return self._cat(node, idx)
        if node.target in PICKS:
            pick = pick_of(program, node)
            return self.at(pick.x, pick.source_index(idx))
        from .pointwise import node_expression  # (pointwise imports this module)
        env = {v: self.at(v, aligned(program, v, idx)) for v in program.inputs_of(node) if program.is_tensor(v)}
        expr = node_expression(program, node, env)
        if out.dtype in _TL and "float" not in out.dtype and node.op != "to_dtype":  # integers stay integral (a
            expr = f"({expr}).to({_TL[out.dtype]})"  # clamp's bounds are written as floats)
        return expr

    def _read(self, read: Read, idx: list[str]) -> str:
        """A read at recomputed positions: one load through the tensor's strides."""
        program = self.program
        xv = program.values[read.x]
        first, b = read.first, read.b
        positions = {}
        for d in read.indexed:
            e = read.entries[d]
            at = self.at(e, aligned(program, e, idx[first:first + b]))
            if program.values[e].dtype == "torch.int32":  # (its product with a stride in 64 bits)
                at = f"{at}.to(tl.int64)"
            positions[d] = f"tl.where({at} < 0, {at} + {xv.shape[d]}, {at})"  # negative: from the end
        rest = iter(i for o, i in enumerate(idx) if not first <= o < first + b)
        if _made_by(program, read.x, program.recomputed):  # a table of positions: computed there
            return self.at(read.x, [positions[d] if d in positions else next(rest) for d in range(len(xv.shape))])
        return self._load(read.x, [positions[d] if d in positions else next(rest) for d in range(len(xv.shape))])

    def _load(self, x: str, idx: list[str]) -> str:
        """Stored tensor `x` at indices `idx`: one load through its strides."""
        g = self.local[x]
        terms = [f"{i} * {g}_s{d}" for d, i in enumerate(idx)]
        offset = " + ".join(t for t in terms if not t.startswith("0 *")) or "0"
        xv = self.program.values[x]
        if xv.kind in ("param", "buffer") and not xv.symbolic and all(i == "0" or i in self.coords for i in idx):
            # (a template's coordinates may be negative: a pooling window's padding)
            bounds = " & ".join(f"({i} >= 0) & ({i} < {size})" for i, size in zip(idx, xv.shape) if i != "0")
            load = f"tl.load({g}_ptr + {offset}" + (f", mask={bounds}, other=0)" if bounds else ")")
            self._narrow.add(load)
            return load
        return f"tl.load({g}_ptr + {offset} + {self.zero}, mask={self.mask}, other=0)"

    def _cat(self, node, idx: list[str]) -> str:
        """Each element is its branch's input at the index shifted by the branch's offset, every
        branch computed under its own mask (its loads stay inside its input)."""
        d = node.attrs["dim"]
        branches, offset = [], 0
        for a in self.program.inputs_of(node):
            size = self.program.values[a].shape[d]
            if size == 0:
                continue
            at = idx[d] if offset == 0 else f"({idx[d]} - {offset})"
            mask = self.mask
            self.mask = f"{mask}{f' & ({idx[d]} >= {offset})' if offset else ''} & ({idx[d]} < {offset + size})"
            try:
                branches.append((offset + size, self.at(a, [at if e == d else i for e, i in enumerate(idx)])))
            finally:
                self.mask = mask
            offset += size
        expr = branches[-1][1]
        for end, value in reversed(branches[:-1]):
            expr = f"tl.where({idx[d]} < {end}, {value}, {expr})"
        return expr


def gathered_check(program, x: str, values: list[str], shape: str, rank: int) -> list[tuple[int, str]]:
    """(dim, size) pairs for tensor `x`, which recomputing `values` reads at computed positions
    inside a kernel over an output of `shape` (a forward expression, `rank` dims; the reads
    broadcast to it, aligned right): an indexed dim must have the size its positions were
    computed for, another dim the output's size it is read at. In dim order."""
    xv = program.values[x]
    sizes = _sizes_within(program, values, shape, rank)
    want: list[tuple[int, str]] = []
    for node in cone(program, values):
        if x not in _data_inputs(program, node):  # (a fill's template: not read)
            continue
        out = sizes[node.outputs[0]]  # (every node reading a stored tensor has its sizes)
        read = read_of(program, node)
        if read is not None and read.x == x:
            want += enumerate(_read_sizes(program, read, out))
        elif read is not None:  # a stored index tensor: the read's indexed block, aligned right
            want += enumerate(_index_sizes(program, read, x, out))
        elif read is None:  # a cat's branch, or what feeds one
            want += enumerate(_input_sizes(program, node, x, out))
    return sorted(set(want))


def _sizes_within(program, values: list[str], shape: str, rank: int) -> dict[str, list[str]]:
    """The sizes each value in the cone of `values` is computed at, as forward expressions:
    those of the output `shape` it broadcasts to (aligned right), a cat's branch its own along
    the cat's dim."""
    sizes = {}
    for v in values:
        vv = program.values[v]
        sizes[v] = ["1" if s == 1 and e not in vv.symbolic else f"{shape}[{rank - len(vv.shape) + e}]"
                    for e, s in enumerate(vv.shape)]
    for node in reversed(cone(program, values)):
        out = sizes.get(node.outputs[0])
        read = read_of(program, node)
        if out is not None and read is not None:  # a read's tensor or ids computed after all (a
            if _made_by(program, read.x, program.recomputed):  # cat that is shifted): their sizes
                sizes.setdefault(read.x, _read_sizes(program, read, out))
            for e in (read.entries[d] for d in read.indexed):
                if _made_by(program, e, program.recomputed):
                    sizes.setdefault(e, _index_sizes(program, read, e, out))
        if out is None or read is not None or node.target in RESHAPES or node.target in EXPANDS:
            continue  # (positions under them: they read nothing stored)
        for a in _data_inputs(program, node):
            if _made_by(program, a, program.recomputed):
                sizes.setdefault(a, _input_sizes(program, node, a, out))
    return sizes


def _read_sizes(program, read: Read, out: list[str]) -> list[str]:
    """The sizes the tensor a read takes its elements from must have, given the read's `out`:
    its own (static) size along an indexed dim, the output's along the others."""
    xv = program.values[read.x]
    kept = iter(o if o < read.first else o + read.b for o in range(len(xv.shape) - len(read.indexed)))
    sizes = []
    for d, s in enumerate(xv.shape):
        if d in read.indexed:
            sizes.append(str(s))
            continue
        at = next(kept)  # (every kept dim has its place in the output, a size of 1 too)
        sizes.append("1" if s == 1 and d not in xv.symbolic else out[at])
    return sizes


def _index_sizes(program, read: Read, e: str, out: list[str]) -> list[str]:
    """The sizes index tensor `e` of a read must have, given the read's `out`: those of the
    read's indexed block it broadcasts to (aligned right)."""
    ev = program.values[e]
    lead = read.first + read.b - len(ev.shape)
    return ["1" if s == 1 and k not in ev.symbolic else out[lead + k] for k, s in enumerate(ev.shape)]


def _input_sizes(program, node, a: str, out: list[str]) -> list[str]:
    """The sizes input `a` of an elementwise node, cat or pick is read at, given the node's `out`."""
    av = program.values[a]
    if node.target in PICKS:  # x: the view's sizes, and its own static size along the picked dim
        pick = pick_of(program, node)
        d = pick.dim
        kept = out if pick.index is None else out[:d] + ["?"] + out[d:]
        return [str(s) if e == d and not pick.whole else kept[e] for e, s in enumerate(av.shape)]
    if node.op == "cat":
        d = node.attrs["dim"]
        return [str(s) if e == d else out[e] for e, s in enumerate(av.shape)]
    lead = len(out) - len(av.shape)
    return ["1" if s == 1 and e not in av.symbolic else out[lead + e] for e, s in enumerate(av.shape)]


def _tuple(parts: list[str]) -> str:
    return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"


def fixed_sizes(program, values: list[str], rank: int) -> dict[int, int]:
    """The sizes recomputed `values` were made for, by dim of an output of `rank` dims they
    broadcast to (aligned right): each static size other than 1 that their index arithmetic
    assumes (`_pinned`)."""
    fixed, memo = {}, {}
    for v in values:
        vv = program.values[v]
        lead = rank - len(vv.shape)
        fixed.update({lead + e: vv.shape[e] for e in _pinned(program, v, memo)
                      if vv.shape[e] != 1 and e not in vv.symbolic})
    return fixed


def _pinned(program, value: str, memo: dict[str, set[int]]) -> set[int]:
    """The dims of `value` whose traced size its recomputation assumes: a pick's dim and a
    cat's, and every dim of what is computed from positions (an arange's arithmetic, a read's
    positions, a reshape of them). Elementwise nodes and picks assume what their inputs do; a
    stored tensor assumes nothing (its sizes are checked where a kernel reads it) but a
    parameter or buffer (read unchecked: its own sizes, every one of them), nor does
    `zeros_like(x)` (x's sizes, whatever they are). So a chunk of a projection read by its
    gate fixes the chunked dim alone, not the sequence's length."""
    if value in memo:
        return memo[value]
    node = program.producer.get(value)
    rank = len(program.values[value].shape)
    if node is None and _parameter(program, value):
        pinned = set(range(rank))  # (never size-checked where read: its sizes are the converted ones)
    elif node is None or node.name not in program.recomputed or node.target in SHAPED_AS_INPUT:
        pinned = set()
    elif node.target in PICKS:
        pick = pick_of(program, node)
        inner = _pinned(program, pick.x, memo)
        if pick.index is not None:  # a select: the dims after it move down one
            pinned = {e - (e > pick.dim) for e in inner if e != pick.dim}
        else:
            pinned = inner | (set() if pick.whole else {pick.dim})
    elif node.op == "cat" or (node.op is not None and fill_value(node) is None
                              and VOCABULARY[node.op].category in POINTWISE and read_of(program, node) is None):
        pinned = {node.attrs["dim"] % rank} if node.op == "cat" else set()
        for a in _data_inputs(program, node):
            lead = rank - len(program.values[a].shape)
            pinned |= {lead + e for e in _pinned(program, a, memo)}
    else:
        pinned = set(range(rank))
    memo[value] = pinned
    return pinned
