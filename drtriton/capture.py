"""Capture: a problem's module as a graph of aten operators, mapped onto the vocabulary.

`torch.export` traces the module (on the meta device, so any size captures in milliseconds)
into aten operators at the level PyTorch users write (`aten.conv2d`, `aten.linear`,
`aten.softmax.int`...), with parameter names kept (`conv.weight`). Each node is then matched to
a vocabulary operator where one covers it (`drtriton.ops.aten`); the others stay PyTorch nodes
that a plan runs as they are.

The graph is plain data (JSON-friendly), because capture runs the user's code and so happens in
a worker process (`Verifier.capture`), and the plan is built in the parent.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Value:
    name: str
    shape: list[int]
    dtype: str
    kind: str  # input | param | buffer | const | node
    fqn: str | None = None  # params and buffers: the state_dict key, e.g. "net.0.weight"
    access: str | None = None  # params and buffers: a Python expression for it, e.g. "self.net[0].weight"
    index: int | None = None  # inputs: position in forward's arguments
    literal: Any = None  # consts: the value, when it is a scalar
    # dims whose size is symbolic (the batch): they take other sizes, so a size of 1 there is not
    # a broadcast; a batch traced at 1 must be indexed like any other
    symbolic: list[int] = field(default_factory=list)
    # inputs: each symbolic dim's symbol ("s0"); dims with one symbol were traced as one size
    symbols: list[str] = field(default_factory=list)


@dataclass
class Node:
    name: str
    target: str  # aten overload, e.g. "aten.conv2d.default"
    args: list  # {"value": name} for tensors, else JSON literals (lists may nest)
    kwargs: dict
    outputs: list[str]  # value names (several for max.dim & co.)
    op: str | None = None  # vocabulary operator, None when the vocabulary does not cover it
    attrs: dict = field(default_factory=dict)  # the vocabulary operator's attributes
    mutates: bool = False  # in-place on a parameter or buffer (batch-norm counters): not part of the result

    @property
    def returns_tuple(self) -> bool:
        """A tuple result (its parts are "<node>.<i>"; unbind of a size-1 axis has one part)."""
        return len(self.outputs) > 1 or self.outputs[0] == f"{self.name}.0"


@dataclass
class Check:
    """A condition forward must find true at run time, else it raises `message`: an
    `assert_async` in forward, or a branch on tensor values taken as it was at capture."""
    value: str  # a 0-d bool tensor
    message: str


@dataclass
class Graph:
    values: dict[str, Value]
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    checks: list[Check] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"values": {k: asdict(v) for k, v in self.values.items()},
                "nodes": [asdict(n) for n in self.nodes], "inputs": self.inputs, "outputs": self.outputs,
                "checks": [asdict(c) for c in self.checks]}

    @classmethod
    def from_dict(cls, d: dict) -> "Graph":
        return cls(values={k: Value(**v) for k, v in d["values"].items()},
                   nodes=[Node(**n) for n in d["nodes"]], inputs=d["inputs"], outputs=d["outputs"],
                   checks=[Check(**c) for c in d.get("checks", [])])

    def roots(self) -> list[str]:
        """The values forward must compute: the outputs and the checked conditions."""
        return self.outputs + [c.value for c in self.checks if c.value not in self.outputs]

    def producer(self) -> dict[str, Node]:
        return {out: n for n in self.nodes for out in n.outputs}

    def fresh_name(self, stem: str, more: tuple[str, ...] | set[str] = ()) -> str:
        """A name no value or node of the graph has, nor any of `more` (a pass's new nodes, not
        in the graph yet): `stem`, else `stem1`, `stem2`, ..."""
        taken = set(self.values) | {n.name for n in self.nodes} | set(more)
        name, i = stem, 0
        while name in taken:
            i += 1
            name = f"{stem}{i}"
        return name

    def users(self) -> dict[str, list[Node]]:
        uses: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in value_refs(n.args) + value_refs(list(n.kwargs.values())):
                uses.setdefault(name, []).append(n)
        return uses


def value_refs(args) -> list[str]:
    """Names of the tensor values an argument list refers to, in order."""
    out = []
    for a in args:
        if isinstance(a, dict) and "value" in a:
            out.append(a["value"])
        elif isinstance(a, (list, tuple)):
            out += value_refs(a)
    return out


def writes_in_place(node: "Node") -> bool:
    """Whether `node` writes into its first input (`add_`, `copy_`, a buffer's update)."""
    parts = node.target.split(".")
    return node.mutates or (len(parts) >= 3 and parts[-2].endswith("_"))


def viewed(values, producer: dict) -> set[str]:
    """`values` and every value they view, through views and copies (`VIEWS`: a copy is sometimes
    elided, so what it copies counts too)."""
    out, todo = set(), list(values)
    while todo:
        v = todo.pop()
        if v in out:
            continue
        out.add(v)
        prod = producer.get(v)
        if prod is not None and prod.target in VIEWS:
            todo += value_refs(prod.args)
    return out


def renamed_refs(args, names: dict[str, str]):
    """`args` with each tensor value that `names` maps renamed (lists followed), the rest as is."""
    if isinstance(args, dict) and "value" in args:
        return {"value": names.get(args["value"], args["value"])}
    if isinstance(args, list):
        return [renamed_refs(a, names) for a in args]
    return args


# What `torch.tensor(c)` in forward traces to: identities on the lifted constant. Capture folds
# them into the constant itself, so a scalar stays a literal the emitters write into the kernel.
_CONSTANT_IDENTITIES = {"aten.lift_fresh_copy.default", "aten.detach.default", "aten.detach_.default"}


#: tensors forward creates from data (`torch.tensor([...])`) are written into the generated
#: module as literals up to this size
MAX_CONSTANT_ELEMENTS = 4096


class CaptureError(Exception):
    """The module could not be traced; the message says why (it then runs as PyTorch)."""


def is_scalar(node: Node, values: dict[str, Value]) -> bool:
    """Whether a node computes a Python number (a size) rather than a tensor: it runs as the
    Python it was, in strict mode too, since it computes nothing on the device."""
    out = values.get(node.outputs[0])
    return out is not None and not out.dtype.startswith("torch.")


# ---------------------------------------------------------------------------------------------
# Inside the worker: trace and convert (imports torch)


def capture_module(model, inputs: list, reads: list | None = None) -> Graph:
    """Trace `model(*inputs)`. Inputs and parameters may live on the meta device (no memory,
    no compute); constants the forward creates are then unknown (`literal` None). `reads`: the
    values forward read out of tensors (`record_reads`), replayed in order, so a size computed
    with `.item()` traces as the constant it was (the verifier then checks that it holds)."""
    import inspect

    graph = at_two = None
    if _batch_of_one(inputs):
        # export would pin a leading size of 1: trace it size-obliviously, else (C++ code that
        # reads the size guards it to 1 all the same) at a batch of 2, kept where it computes
        # what the trace as it is does; a module that needs the size pinned is traced as it is
        ones = [i for i, x in enumerate(inputs) if _leading_one(x)]
        shapes = _output_shapes(model, inputs)
        broadcast: set[int] = set()  # leading ones found to broadcast: fixed in both traces
        graph = _batch_trace(model, inputs, reads, ones, shapes, broadcast, oblivious=True)
        if graph is None:
            at_two = _batch_trace(model, inputs, reads, ones, shapes, broadcast, oblivious=False)
    if graph is None:
        graph = _trace(model, inputs, reads)
        if at_two is not None:
            graph = _same_operators(at_two, graph)
    for v in graph.values.values():
        if v.kind in ("param", "buffer") and v.fqn:
            v.access = access_path(model, v.fqn)
    # torch.export lower-cases placeholder names (forward(self, A, B) gives "a", "b"); generated
    # code must use forward's own parameter names.
    params = [p.name for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return _rename_inputs(graph, dict(zip(graph.inputs, params)))


def _leading_one(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[0] == 1


def _batch_of_one(inputs: list) -> bool:
    """Whether some tensor input has a leading (batch) size of 1, which torch.export pins
    ("0/1 specialization") unless sizes are traced size-obliviously."""
    return any(_leading_one(x) for x in inputs)


def _same_operators(at_two: Graph, at_one: Graph) -> Graph:
    """The graph traced at a batch of 2 when it runs the operators of the one traced as it is
    (at 1), else the latter: at 2 a test such as `x.size(0) == 1` is decided the other way
    without a guard, and the module at its own batch would compute something else."""
    def plain(a):  # an argument with tensors, and lists (sizes), left anonymous
        return "tensor" if isinstance(a, dict) else "list" if isinstance(a, (list, tuple)) else a

    def operators(g: Graph) -> list:  # what computes: views and allocations differ with the sizes
        return [(n.target, [plain(a) for a in n.args]) for n in g.nodes if n.target.startswith("aten.")
                and n.target not in VIEWS and n.target not in ALLOCATIONS
                and "sym_" not in n.target and "assert" not in n.target]

    return at_two if operators(at_two) == operators(at_one) else at_one


def _output_shapes(model, inputs: list) -> list[tuple] | None:
    """The shapes of the tensors `model(*inputs)` returns (inputs on the meta device: nothing
    computed), None where that does not run."""
    import torch
    from torch.utils._pytree import tree_leaves

    try:
        with torch.no_grad():
            out = model(*inputs)
    except Exception:  # noqa: BLE001 - a forward that reads values: not judged here
        return None
    return [tuple(t.shape) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _gives_shapes(graph: Graph, shapes: list[tuple] | None) -> bool:
    """Whether a trace made with symbolic batch sizes returns the module's own output shapes:
    the same ranks, and the same sizes in every dim that is not symbolic (None: not known)."""
    if shapes is None or len(shapes) != len(graph.outputs):
        return True
    for name, shape in zip(graph.outputs, shapes):
        value = graph.values[name]
        if len(value.shape) != len(shape) or any(a != b for d, (a, b) in enumerate(zip(value.shape, shape))
                                                 if d not in value.symbolic):
            return False
    return True


def _batch_of_two(inputs: list, batch: list[int]) -> list:
    """The inputs with the leading size of 1 of those in `batch` (by position) made 2 (the row
    repeated): a batch export keeps symbolic without the 0/1 specialization."""
    import torch

    return [torch.cat([x, x]) if i in batch else x for i, x in enumerate(inputs)]


def _batch_trace(model, inputs: list, reads: list | None, ones: list[int], shapes: list[tuple] | None,
                 static: set[int], oblivious: bool) -> "Graph | None":
    """A trace keeping the leading size of 1 of the `ones` inputs symbolic: size-obliviously,
    or at a batch of 2. None where it fails, keeps none of them symbolic, or does not give the
    module's own output shapes (treated as not 1, a batch of 1 is no longer squeezed away:
    `x.squeeze(0)`). A leading 1 that the trace makes the size of another input's larger dim is
    not a batch but a broadcast (a (1, T, D) mask beside a (B, T, D) input): it joins `static`
    (kept for the caller's next trace) and is traced again as the fixed 1 it is."""
    while True:
        batch = [i for i in ones if i not in static]
        if not batch:
            return None
        try:
            graph = _trace(model, inputs if oblivious else _batch_of_two(inputs, batch), reads,
                           oblivious=oblivious, batch=batch, static=static)
        except Exception:
            return None
        if not _gives_shapes(graph, shapes):
            return None
        broadcast = _broadcast_ones(graph, inputs, batch)
        if not broadcast:
            return graph
        static |= broadcast


def _broadcast_ones(graph: Graph, inputs: list, batch: list[int]) -> set[int]:
    """The `batch` inputs (by position) whose leading size of 1 the trace gave the symbol of a
    dim that is larger in another input: export took the 1 for a size that is not 1, and the
    two for equal."""
    import torch

    sizes: dict[str, set[int]] = {}  # symbol -> the example inputs' sizes where it stands
    leading: dict[int, str] = {}  # input position -> its leading dim's symbol
    for name in graph.inputs:
        value = graph.values[name]
        x = inputs[value.index] if value.index is not None and value.index < len(inputs) else None
        if not isinstance(x, torch.Tensor) or x.dim() != len(value.shape):
            continue
        for dim, symbol in zip(value.symbolic, value.symbols):
            sizes.setdefault(symbol, set()).add(int(x.shape[dim]))
            if dim == 0:
                leading[value.index] = symbol
    return {i for i in batch if i in leading and sizes[leading[i]] != {1}}


def _trace(model, inputs: list, reads: list | None, oblivious: bool = False,
           batch: list[int] | None = None, static: set[int] = frozenset()) -> Graph:
    """Export (`reads` replayed), inline, and lower what the vocabulary lacks. `oblivious`: with
    `backed_size_oblivious`, so a leading size of 1 stays symbolic like any other (a module
    converted at batch 1 then takes other batch sizes). `batch`: the inputs whose leading size
    must stay symbolic; export failing, or fixing one of them to a number, is then an error (the
    caller traces another way) instead of a static trace. `static`: inputs (by position) whose
    sizes are traced fixed from the start."""
    import torch.fx.experimental._config as fx_config

    from drtriton.batch_norm_epilogue import batch_norm_epilogues
    from drtriton.elide_copies import elide_copies
    from drtriton.masked_update import push_elementwise_into_masked_updates
    from drtriton.recompose import recompose
    from drtriton.symbolic_forms import SymbolicForms

    from drtriton.ops.aten import SymbolicSize
    from drtriton.rank0 import promote_rank0
    from drtriton.split_parts import split_parts

    static = set(static)  # and the inputs whose sizes an operator fixes (a weight passed to forward)
    while True:
        with fx_config.patch(backed_size_oblivious=True) if oblivious else contextlib.nullcontext():
            # composites whose C++ would pin the batch go through Python forms (`symbolic_forms`)
            with SymbolicForms():
                ep = _export(model, inputs, static_fallback=batch is None, static=static, reads=reads)
            if batch is not None and _batch_pinned(ep, [i for i in batch if i not in static]):
                raise CaptureError("the batch was traced as a fixed size")
            inline_context_regions(ep.graph_module)
            push_elementwise_into_masked_updates(ep.graph_module)
            ep = _through_vmap(ep)
            # what no output needs (a pooler beside the hidden states returned) is not converted;
            # the graph's in-place updates are impure and stay
            ep.graph_module.graph.eliminate_dead_code()
            ep.graph_module.recompile()
            try:
                graph = _convert(ep)
                lowered = _decompose_uncovered(ep, graph)
            except SymbolicSize as e:
                if e.index is not None and e.index not in static:
                    static.add(e.index)
                elif batch is None and len(static) < len(inputs):
                    static = set(range(len(inputs)))
                else:
                    raise CaptureError(str(e)) from None
                continue
        graph = split_parts(graph if lowered is None else lowered)
        return promote_rank0(batch_norm_epilogues(recompose(elide_copies(graph))))


def _tensor_reads() -> set:
    """The reads of a value out of a tensor a torch-function mode sees (`if t:`: `_bool_reads`)."""
    import torch

    T = torch.Tensor
    return {T.item, T.tolist, T.__float__, T.__int__, T.__index__}


@dataclass
class Branch:
    """`if t:` on a tensor computed from the inputs, as forward took it on the example inputs."""
    taken: bool
    where: str  # the line that branched, for the error raised where inputs take the other way


#: the message of a branch's check starts with this
BRANCH_CHECK = "forward branched on tensor values"


@contextlib.contextmanager
def _bool_reads(answer):
    """`if t:` on any tensor answered by `answer(t, bool_of)` while inside. `Tensor.__bool__`
    itself is replaced, not seen through a torch-function mode: a mode does not see inside a
    Python function that hands itself to it whole (F.gaussian_nll_loss's `torch.any(var < 0)`)."""
    import torch

    own = torch.Tensor.__dict__.get("__bool__")
    bool_of = torch.Tensor.__bool__
    answering = []  # a torch-function mode hands the read back here: answered once

    def read(t):
        if answering:
            return bool_of(t)
        answering.append(t)
        try:
            return answer(t, bool_of)
        finally:
            answering.pop()

    torch.Tensor.__bool__ = read
    try:
        yield
    finally:
        if own is None:
            del torch.Tensor.__bool__
        else:
            torch.Tensor.__bool__ = own


def _caller() -> str:
    """The innermost line of forward's code (outside torch's and drtriton's machinery) running."""
    import linecache
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        if not any(part in path for part in ("/drtriton/", "/torch/overrides", "/torch/_tensor", "/torch/utils/",
                                             "/contextlib")):
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            return f"{path.rsplit('/', 1)[-1]}:{frame.f_lineno} `{line}`"
        frame = frame.f_back
    return "forward"


def record_reads(model, inputs: list) -> list:
    """Run `model(*inputs)` for real and return, in order, the Python values its forward read
    out of tensors (`.item()`, `int(t)`, `.tolist()`, `if t:`). A branch (`if t:`) on anything
    but a constant is a `Branch`, traced as taken and checked at run time; another read of a
    value computed from the inputs (`n = x.sum().item()`) is data, not a constant: CaptureError."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_leaves

    reads, which = [], _tensor_reads()
    derived = {id(t): t for t in inputs if isinstance(t, torch.Tensor)}  # held, so ids stay unique
    constant: dict[int, object] = {}  # what the mode saw computed from no input

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            from_inputs = any(id(a) in derived for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor))
            if func in which:
                if from_inputs:
                    raise CaptureError(f"forward reads a value computed from its inputs ({func.__name__} "
                                       "of a tensor): control flow on data cannot be traced")
                reads.append(out)
                return out
            written = [args[0]] if args and isinstance(args[0], torch.Tensor) and _writes_first(func) else []
            written += [t for t in tree_leaves(kwargs.get("out")) if isinstance(t, torch.Tensor)]
            # (m[:] = x > 0: m now follows the inputs, and `derived` wins over `constant`)
            seen = derived if from_inputs else constant
            seen.update({id(t): t for t in tree_leaves(out) + written if isinstance(t, torch.Tensor)})
            return out

    def branch(t, bool_of):
        taken = bool_of(t)
        # a constant's value is replayed as it is; one from the inputs (or computed where the
        # mode saw nothing: inside F.*) is checked
        reads.append(taken if id(t) in constant and id(t) not in derived else Branch(taken, _caller()))
        return taken

    try:
        with torch.no_grad(), Record(), _bool_reads(branch):
            model(*inputs)
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(f"the module's forward raised {type(e).__name__}: {e}") from None
    return reads


def _writes_first(func) -> bool:
    """Whether a torch function writes into its first argument (`x.add_(y)`, `m[:] = v`)."""
    name = getattr(func, "__name__", "")
    return name == "__setitem__" or (name.endswith("_") and not name.endswith("__"))


@contextlib.contextmanager
def _Replay(reads: list):
    """Tensor reads answered with `reads`, in order. A branch on values computed from the inputs
    answers as it was taken and leaves an `assert_async` in the trace that it goes the same way
    (capture makes it a `Check`)."""
    import torch
    from torch.overrides import TorchFunctionMode

    which, pending = _tensor_reads(), list(reads)

    class Replay(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in which and pending:
                return pending.pop(0)
            return func(*args, **(kwargs or {}))

    def branch(t, bool_of):
        if not pending:
            return bool_of(t)
        read = pending.pop(0)
        if not isinstance(read, Branch):
            return read
        cond = t != 0  # a new tensor even for a bool one: forward may write into t afterwards
        torch._assert_async(cond if read.taken else torch.logical_not(cond),
                            f"{BRANCH_CHECK} at {read.where}: the converted module goes the way the example "
                            "inputs went, and these inputs go the other way")
        return read.taken

    with Replay(), _bool_reads(branch):
        yield


def _export(model, inputs: list, static_fallback: bool = True, static: set[int] = frozenset(),
            reads: list | None = None):
    """torch.export with the leading (batch) dimension of every tensor input (but those in
    `static`, by position) symbolic where the module allows it, so sizes derived from it (views,
    `zeros(B, ...)`) stay expressions and the converted module takes other batch sizes; fully
    static when that fails (unless not `static_fallback`: then the error). `reads` are replayed
    from the first in each attempt (`_Replay`)."""
    import torch
    from torch.export import Dim

    def replay():
        return _Replay(reads) if reads is not None else contextlib.nullcontext()

    dynamic = tuple({0: Dim.AUTO} if isinstance(x, torch.Tensor) and x.dim() > 0 and i not in static else None
                    for i, x in enumerate(inputs))
    try:
        with replay():
            return torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic, strict=False)
    except Exception:
        if not static_fallback:
            raise
    try:
        with replay():
            return torch.export.export(model, tuple(inputs), strict=False)
    except Exception as e:  # data-dependent control flow, unsupported Python, ...
        raise CaptureError(f"torch.export could not trace the module: {type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''}") from None


def _batch_pinned(ep, batch: list[int]) -> bool:
    """Whether export fixed the leading size of one of the `batch` inputs (by position among
    forward's arguments): a number, or a symbol a guard holds to one (C++ code that reads a
    size, as `linear` does on a sequence-first batch of 1, adds `Eq(s, 1)` even when tracing
    size-obliviously)."""
    import sympy

    users = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    vals = {n.name: n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"}
    leads = [vals[users[i]].shape[0] for i in batch if i < len(users) and hasattr(vals.get(users[i]), "shape")]
    if any(isinstance(s, int) for s in leads):
        return True
    if not leads:
        return False
    symbols = {s.node.expr for s in leads}
    return any(isinstance(g.expr, sympy.Eq) and {g.expr.lhs, g.expr.rhs} & symbols and
               any(side.is_number for side in (g.expr.lhs, g.expr.rhs)) for g in leads[0].node.shape_env.guards)


def inline_context_regions(gm) -> None:
    """Put the body of each `with torch.no_grad()` / `torch.set_grad_enabled(...)` /
    `torch.autocast(..., enabled=False)` region of forward back into the graph, in place.
    torch.export wraps such a region in a higher-order operator (`wrap_with_set_grad_enabled`,
    `wrap_with_autocast`) calling a submodule (transformers' rotary embeddings disable autocast);
    for a forward pass without autocast they change nothing the graph computes. An enabled
    autocast region would compute in a lower precision: CaptureError."""
    from torch._higher_order_ops.wrap import wrap_with_autocast, wrap_with_set_grad_enabled

    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is wrap_with_set_grad_enabled:  # (enabled, body, *operands)
            body, operands = node.args[1], node.args[2:]
        elif node.target is wrap_with_autocast:  # (device, dtype, enabled, cache_enabled, body, *operands)
            device, dtype, enabled = node.args[:3]
            if enabled:
                raise CaptureError(f"forward computes a region under torch.autocast({device!r}, dtype={dtype}): "
                                   "its lower-precision casts are not captured")
            body, operands = node.args[4], node.args[5:]
        else:
            continue
        sub = getattr(gm, body.target)
        inline_context_regions(sub)  # nested regions first: the copy below then holds no get_attr
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        with graph.inserting_before(node):
            results = graph.graph_copy(sub.graph, dict(zip(placeholders, operands)))
        for user in list(node.users):  # the region's results are read with getitem(node, i)
            user.replace_all_uses_with(results[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(node)
        if not body.users:
            graph.erase_node(body)
            delattr(gm, body.target)
    graph.lint()
    gm.recompile()


def _untraced(n) -> bool:
    """A call torch.export keeps that is no operator: a higher-order operator (torch.cond, the
    `flat_apply` of a function vmap maps) or vmap's own bookkeeping (`_add_batch_dim`)."""
    import torch

    return n.op == "call_function" and (isinstance(n.target, torch._ops.HigherOrderOperator)
                                        or (getattr(n.target, "__module__", None) or "").startswith("torch._functorch"))


def _through_vmap(ep):
    """`ep` retraced through what it keeps of vmap, when it keeps any (transformers 4.x builds
    attention masks with vmap): run_decompositions with no table traces the program again and
    unrolls vmap into aten operators. `ep` itself when there is none or retracing fails (the
    capture then says what is left)."""
    if not any(_untraced(n) for n in ep.graph.nodes):
        return ep
    try:
        return ep.run_decompositions({})
    except Exception:
        return ep


# What capture leaves as it is, covered or not: views and sizes compute nothing, and an
# allocation computes from no input (both run as PyTorch in strict mode too).
VIEWS = {
    "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.unsqueeze.default",
    "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.permute.default",
    "aten.transpose.int", "aten.t.default", "aten.numpy_T.default", "aten.expand.default",
    "aten.flatten.using_ints", "aten.unflatten.int", "aten.select.int", "aten.slice.Tensor",
    "aten.narrow.default", "aten.detach.default", "aten.detach_.default", "aten.alias.default",
    "aten.contiguous.default", "aten.clone.default", "aten.lift_fresh_copy.default",
    "aten.split.Tensor", "aten.split_with_sizes.default", "aten.unbind.int", "aten.chunk.default",
    "aten.tensor_split.sections", "aten.tensor_split.indices", "aten.movedim.int", "aten.diagonal.default",
    "aten.expand_as.default", "aten.view_as.default", "aten.reshape_as.default",
    "aten.as_strided.default",  # what Tensor.unfold (sliding windows) lowers to
    "aten.meshgrid.default", "aten.meshgrid.indexing",  # expanded views of each input
    # what PyTorch's reference decompositions (the second lowering table) leave as prims; generated
    # code spells them in aten (emit/pytorch.py), which the verifier knows
    "prims.broadcast_in_dim.default",
}
#: copies whose result has their input's values and dtype (eval-mode dropout is a clone)
VALUE_COPIES = {"aten.clone.default", "aten.alias.default"}
ALLOCATIONS = {
    "aten.zeros.default", "aten.ones.default", "aten.full.default", "aten.empty.memory_format",
    "aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default", "aten.empty_like.default",
    "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default", "aten.new_empty.default",
    "aten.arange.default", "aten.arange.start", "aten.arange.start_step", "aten.scalar_tensor.default",
    "prims.scalar_tensor.default",
}


#: operators of other libraries that capture knows, and the module whose import registers each
#: (code that calls one outside the problem's own process imports it first: a fragment's problem)
LIBRARY_OPERATORS = {"transformers.grouped_mm_fallback.default": "transformers.integrations.moe"}


def uncovered(graph: Graph) -> set[str]:
    """The aten operators (and `LIBRARY_OPERATORS`) of `graph` that compute and that the
    vocabulary does not cover."""
    return {n.target for n in graph.nodes if n.op is None
            and (n.target.startswith("aten.") or n.target in LIBRARY_OPERATORS)
            and n.target not in VIEWS and n.target not in ALLOCATIONS and not is_scalar(n, graph.values)}


def _decompose_uncovered(ep, graph: Graph) -> Graph | None:
    """Lower the operators the vocabulary does not cover with PyTorch's own decompositions (the
    table `torch.export` and Inductor use, down to Core ATen): `masked_fill` becomes `where`, an
    LSTM with dropout its matrix products and gates, `pixel_shuffle` views. Covered operators
    stay as they are (a convolution is not taken apart). A few rounds, as one lowering may
    produce another operator to lower (`pad` -> `constant_pad_nd` -> ...), while each round
    changes what is left. None when there is nothing to lower or lowering fails: the operators
    then run as PyTorch, as before."""
    from .ops.aten import SymbolicSize

    tables = _decomposition_tables()
    current_ep, current = ep, graph
    for _ in range(6):  # cross_entropy -> nll_loss_nd -> nll_loss -> nll_loss_forward -> ...
        chosen = _decompositions_for(current_ep, uncovered(current), tables)
        if not chosen:
            break
        try:
            lowered_ep = current_ep.run_decompositions(chosen)
            lowered = _convert(lowered_ep)
        except SymbolicSize:  # an operator it lowers to fixes a symbolic size: `_trace` again
            raise
        except Exception:  # a decomposition that does not trace here: keep the operators
            break
        if _covered(current) - _covered(lowered):
            break
        progressed = Counter(n.target for n in lowered.nodes) != Counter(n.target for n in current.nodes)
        current_ep, current = lowered_ep, lowered
        if not progressed:
            break
    return None if current is graph else current


def _decomposition_tables() -> tuple:
    """Export's table (to Core ATen), then, for Core ATen operators we lack (upsample, addmm,
    constant_pad_nd, grid_sampler), Inductor's, then our own (`store_lowerings`)."""
    from torch._decomp import decomposition_table
    from torch.export import default_decompositions

    return default_decompositions(), decomposition_table, store_lowerings()


def _decompositions_for(ep, wanted: set[str], tables: tuple) -> dict:
    """The first decomposition the `tables` have for each operator of `ep` named in `wanted`
    (one of ours only where every node of that operator admits it: `_LOWERABLE`)."""
    import torch

    def table_of(op):
        if str(op) in _OURS_FIRST:  # PyTorch's leaves the general case whole
            return tables[-1] if op in tables[-1] else None
        return next((t for t in tables if op in t), None) or _composite_implicit(op)

    chosen, refused, seen = {}, set(), set()
    for n in ep.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and str(n.target) in wanted:
            seen.add(str(n.target))
            table = table_of(n.target)
            if table is None:
                continue
            admits = _LOWERABLE.get(str(n.target))
            if table is tables[-1] and admits is not None and not admits(n):
                refused.add(n.target)
            else:
                chosen[n.target] = table[n.target]
    # operators that appear only once export's own decompositions have run (cross_entropy's
    # nll_loss_nd becomes nll_loss_forward): their entries too, where no per-node check applies
    for name in wanted - seen - set(_LOWERABLE):
        op = _overload(name)
        table = table_of(op) if op is not None else None
        if table is not None:
            chosen[op] = table[op]
    return {k: v for k, v in chosen.items() if k not in refused}


def _composite_implicit(op) -> dict | None:
    """A table holding the operator's own composite form (`x.mT` is `transpose(-2, -1)`) where
    it is CompositeImplicitAutograd and no table has it: what the C++ calls, traced."""
    import torch

    if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"):
        return {op: op.decompose}
    return None


def _overload(name: str):
    """torch.ops' overload for "aten.<op>.<overload>", or None."""
    import torch

    namespace, op, overload = name.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), op), overload)
    except (AttributeError, RuntimeError):
        return None


# -- lowerings of our own: store-side operators PyTorch's tables leave whole, written with the
# scatter and index_put the vocabulary covers (drtriton.policy.emit.scatter), as Inductor lowers them

def _first_input(n):
    """The example tensor the trace saw as node `n`'s first argument, or None."""
    return n.args[0].meta.get("val") if hasattr(n.args[0], "meta") else None


def _on_contiguous_input(n) -> bool:
    """A scatter into a view of its input, lowered to positions in the input's storage: only
    where that storage is the input's own contiguous layout."""
    val = _first_input(n)
    return val is not None and val.is_contiguous() and val.storage_offset() == 0


def _index_put_lowerable(n) -> bool:
    """index_put with one boolean mask (full slices before it) and values of x[mask]'s rank at
    most (the same for every selected element, or one per selected element); or with integer
    indices only (the vocabulary's scatter, passed through: a compaction's, beside a mask's)."""
    import torch

    indices, values = n.args[1], n.args[2]
    tensors = [i for i in indices if i is not None]
    dtypes = [getattr(i.meta.get("val"), "dtype", None) if hasattr(i, "meta") else None for i in tensors]
    if tensors and all(d in (torch.int64, torch.int32) for d in dtypes):
        return True
    if len(tensors) != 1 or not hasattr(values, "meta"):
        return False
    at = indices.index(tensors[0])
    mask, x, v = tensors[0].meta.get("val"), n.args[0].meta.get("val"), values.meta.get("val")
    if mask is None or x is None or v is None or mask.dtype != torch.bool or any(i is not None for i in indices[at + 1:]):
        return False
    return v.dim() <= x.dim() - mask.dim() + 1


def _histc_lowerable(n) -> bool:
    """An input in float32 or float64, or an integer one, whose bins PyTorch's kernels compute as
    the lowering does (half precision computes them in float on the GPU)."""
    import torch

    val = _first_input(n)
    return val is not None and (val.dtype in (torch.float32, torch.float64)
                                or not (val.dtype.is_floating_point or val.dtype.is_complex or val.dtype == torch.bool))


_LOWERABLE = {"aten.index_put.default": _index_put_lowerable, "aten.histc.default": _histc_lowerable,
              "aten.as_strided_scatter.default": _on_contiguous_input,
              "aten.diagonal_scatter.default": _on_contiguous_input}
#: operators whose PyTorch decomposition does not reach the vocabulary: ours is taken first.
#: adaptive_max_pool2d/3d: PyTorch's covers only even windows and global pooling; bilinear: it goes
#: through _trilinear; the scatters into views: a copy into a view, which functionalisation turns
#: back into the same scatter; cdist: PyTorch's p = 2 past 25 rows is |a|^2 + |b|^2 - 2ab, whose
#: cancellation a float32 product (tf32x3) cannot hold to the reference's error; index_put (with
#: a boolean mask: `_index_put_lowerable`): PyTorch's keeps the data-dependent selection
_OURS_FIRST = {"aten.index_put.default", "aten.adaptive_max_pool2d.default", "aten.adaptive_max_pool3d.default",
               "aten.bilinear.default",
               "aten.as_strided_scatter.default", "aten.diagonal_scatter.default", "aten.index.Tensor",
               "aten.cdist.default"}


def store_lowerings() -> dict:
    """aten operator -> a decomposition into operators the vocabulary covers:

    - `index_reduce`: scatter_reduce with the index broadcast along the other axes.
    - `put`: index_put on the flat tensor.
    - `masked_scatter`: the source position of each masked element from a cumsum of the mask,
      read with advanced indexing, chosen with `where` (Inductor's two-step algorithm).
    - `bilinear` (nn.Bilinear): a matrix product of x2 with the weight as (out x in1, in2), then
      the product with x1 summed over in1 (no (out, in1, in2)-sized intermediate per sample).
    - `addbmm`: the batched product summed over the batch, scaled, plus beta * self.
    - `as_strided_scatter`, `diagonal_scatter` (on a contiguous input): src stored with index_put
      at the view's element positions (an arange per dimension times its stride).
    - `nonzero`, `nonzero_static`, `masked_select`, `x[mask]`: compaction, each kept element's row
      from a cumsum of the mask and stored with index_put, the count read back as the size (last,
      after the launches); nonzero compacts flat positions, then turns the kept ones into
      coordinates; `x[mask]` with one mask reads the kept elements (or rows) directly; `unique`
      (sorted) and `unique_consecutive`: the runs' first values compacted, inverse and counts.
    - `linalg_pinv`: from the SVD (or eigh), as PyTorch's C++ computes it.
    - `_cdist_forward` (torch.cdist): the p-norm of the broadcast differences over the features.
    - `index_put` with one boolean mask (`x[mask] = v`, `+= v`): with values the same for every
      selected element, `where(mask, v, x)` (accumulating: x plus v where the mask holds); with a
      value per selected element (`x[mask] = g(x[mask])`), each position's row of values from a
      cumsum of the mask, read with advanced indexing, chosen with `where`.
    - `histc`: each element's bin computed as PyTorch's kernels do, the counts accumulated
      with index_put (elements outside the range count zero).
    - `grid_sampler_3d` (F.grid_sample on volumes): as PyTorch's 2-D decomposition, in 3-D: the
      source coordinates, the 8 corners (trilinear) or the nearest read with advanced indexing."""
    import torch

    aten = torch.ops.aten

    def index_reduce(self, dim, index, source, reduce, include_self=True):
        if self.dim() == 0:
            out = index_reduce(self.unsqueeze(0), 0, index, source.reshape(1), reduce, include_self)
            return out.squeeze(0)
        dim = dim % self.dim()
        along = [-1 if d == dim else 1 for d in range(source.dim())]
        return aten.scatter_reduce.two(self, dim, index.reshape(along).expand(source.shape), source, reduce,
                                       include_self=include_self)

    def put(self, index, source, accumulate=False):
        flat = aten.index_put.default(self.reshape(-1), [index.reshape(-1)], source.reshape(-1), accumulate)
        return flat.view(self.shape)

    def in_order(source, keep, dim=0):
        # for each position of `keep` (flattened), the slice of `source` along `dim` it takes when
        # marked: the count of marked positions before it (a cumsum). Positions before the first
        # mark read slice 0, and a spare slice of zeros gives one to read where the source is
        # empty (its size may be a count of selected elements, 0 on some inputs: none is marked)
        spare = torch.cat([source, source.new_zeros([*source.shape[:dim], 1, *source.shape[dim + 1:]])], dim=dim)
        at = torch.clamp(aten.cumsum.default(keep.reshape(-1), 0) - 1, min=0)
        return aten.index.Tensor(spare, [None] * dim + [at])

    def masked_scatter(self, mask, source):
        shape = torch.broadcast_shapes(self.shape, mask.shape)
        keep = mask.expand(shape).reshape(-1)
        picked = in_order(source.reshape(-1), keep)
        return torch.where(keep, picked, self.expand(shape).reshape(-1)).view(shape)

    def index_put(self, indices, values, accumulate=False):
        # x[mask] = v (or += v) with one boolean mask (`_index_put_lowerable`): v the same for every
        # selected element is where(mask, v, x), the mask over its dims of x, v over the dims after
        given = [m for m in indices if m is not None]
        if len(given) != 1 or given[0].dtype != torch.bool:  # integer indices (a compaction's, or
            # traced in another lowering of the same round): the scatter the vocabulary covers
            return aten._unsafe_index_put.default(self, indices, values, accumulate)
        at = next(i for i, m in enumerate(indices) if m is not None)
        mask, after = indices[at], self.dim() - at - indices[at].dim()
        mask = mask.reshape(*mask.shape, *[1] * after)
        values = values.to(self.dtype)
        picked = values.dim() - after - 1  # the selection's dim of the values, where they have one
        # a size of 1 there broadcasts (a symbolic one traced at 1 too); another, or one that
        # follows the data (no hint), is a value per selected element
        size = values.shape[picked] if picked >= 0 else 1
        if (size if isinstance(size, int) else size.node.hint) != 1:
            # a value per selected element (x[mask] = g(x[mask])): x[mask] lists the selected
            # positions of the mask in row-major order, so each position reads its row of values
            # in that order (a cumsum over the mask's own elements, not over every element it
            # covers, as masked_scatter's broadcast mask would)
            lead, tail = list(self.shape[:at]), list(self.shape[self.dim() - after:])
            values = values.expand(*lead, values.shape[picked], *tail)
            rows = in_order(values, indices[at], at).reshape(*lead, *indices[at].shape, *tail)
            if accumulate:
                return self + torch.where(mask, rows, torch.zeros_like(rows))
            return torch.where(mask, rows, self)
        if picked >= 0:  # (1, *after): the selection's dim, of size 1
            values = values.reshape(values.shape[picked + 1:])
        if accumulate:
            return self + torch.where(mask, values, torch.zeros_like(values))
        return torch.where(mask, values, self)

    def adaptive_max_pool(input, output_size):
        # over the last len(output_size) dims (2 or 3; 1-D pooling is PyTorch's 2-D with a height of 1)
        n = len(output_size)
        sizes, outs = list(input.shape[-n:]), list(output_size)
        if all(i % o == 0 for i, o in zip(sizes, outs)):  # even windows: a max pool (PyTorch's own)
            pool = {2: aten.max_pool2d_with_indices.default, 3: aten.max_pool3d_with_indices.default}[n]
            return pool(input, [i // o for i, o in zip(sizes, outs)])
        # windows [floor(o I / O), ceil((o + 1) I / O)) per dim, read as (O, K) positions (K the
        # longest, positions past a window's end masked to -inf), then one max over each window's
        # K_1 ... K_n positions
        def windows(size, out):  # window positions, clamped into the input, and which are real
            k = max(-(-(o + 1) * size // out) - o * size // out for o in range(out))
            # integer arithmetic (not negative: truncating division floors); a float64 form
            # was exact too, but each element of the fused gather recomputed it, dividing in float64
            o = torch.arange(out, device=input.device)
            start = torch.div(o * size, out, rounding_mode="trunc").unsqueeze(1)
            end = torch.div((o + 1) * size + out - 1, out, rounding_mode="trunc").unsqueeze(1)
            pos = start + torch.arange(k, device=input.device).unsqueeze(0)
            return k, torch.clamp(pos, max=size - 1), pos < end

        found = [windows(size, out) for size, out in zip(sizes, outs)]
        ks = [k for k, _, _ in found]

        def spread(t, d):  # dim d's (O_d, K_d) table over (O_1, ..., O_n, K_1, ..., K_n)
            shape = [1] * (2 * n)
            shape[d], shape[n + d] = outs[d], ks[d]
            return t.view(shape)

        pos = [spread(p, d) for d, (_, p, _) in enumerate(found)]
        ok = functools.reduce(torch.logical_and, [spread(r, d) for d, (_, _, r) in enumerate(found)])
        window = math.prod(ks)
        picked = aten.index.Tensor(input, [None] * (input.dim() - n) + pos)
        picked = torch.where(ok, picked, float("-inf")).reshape(*input.shape[:-n], *outs, window)
        values, k = aten.max.dim(picked, -1)  # the first maximum in window order, as PyTorch
        # the maximum's flat index in the input's pooled dims, looked up from the window position
        flat = sum(p * math.prod(sizes[d + 1:]) for d, p in enumerate(pos)).reshape(*outs, window)
        flat = flat.expand(*input.shape[:-n], *outs, window)
        return values, aten.gather.default(flat, -1, k.unsqueeze(-1)).squeeze(-1)

    def bilinear(input1, input2, weight, bias=None):
        # y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j]: x2 against W as one (O I, J) matrix, then
        # the sum over i with x1 (PyTorch's own goes through _trilinear, which nothing lowers)
        out_f, in1, in2 = weight.shape
        t = aten.matmul.default(input2, weight.reshape(out_f * in1, in2).t())
        y = (t.reshape(*input2.shape[:-1], out_f, in1) * input1.unsqueeze(-2)).sum(-1)
        return y + bias if bias is not None else y

    def addbmm(self, batch1, batch2, beta=1, alpha=1):
        # beta * self + alpha * the batch's products summed; beta 0 ignores self (nan included)
        prod = aten.sum.dim_IntList(aten.bmm.default(batch1, batch2), [0])
        prod = prod * alpha if alpha != 1 else prod
        if beta == 0:
            return prod
        return (self * beta if beta != 1 else self) + prod

    def as_strided_scatter(self, src, size, stride, storage_offset=None):
        # the strided view's element positions in self's storage (contiguous: `_LOWERABLE`), one
        # arange per dimension times its stride, then src stored there (index_put)
        pos = torch.full((), storage_offset or 0, dtype=torch.int64, device=self.device)
        for n, s in zip(size, stride):
            pos = pos.unsqueeze(-1) + torch.arange(n, device=self.device) * s
        flat = aten.index_put.default(self.reshape(-1), [pos.reshape(-1)], src.to(self.dtype).reshape(-1))
        return flat.view(self.shape)

    def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
        view = self.diagonal(offset, dim1, dim2)  # its sizes and strides in self's contiguous layout
        return as_strided_scatter(self, src, view.shape, view.stride(), view.storage_offset())

    def unravel(flat, shape):
        # flat row-major positions (N,) as coordinates (N, ndim): each dimension's index, the
        # position's quotient by the dimensions after it, modulo its size (the first needs none).
        # Positions are not negative, so truncating division and fmod are floor's and remainder's
        if len(shape) == 0:
            return flat.new_zeros((flat.shape[0], 0))
        coords, inner = [], 1
        for d in reversed(range(len(shape))):
            q = torch.div(flat, inner, rounding_mode="trunc") if d < len(shape) - 1 else flat
            coords.append(torch.fmod(q, shape[d]) if d > 0 else q)
            inner = inner * shape[d]
        return torch.stack(coords[::-1], -1)

    def compact(keep, values):
        # the rows of values (P, ...) that keep (P,) marks, in order, and how many: each kept row's
        # place from a cumsum of keep, stored with index_put, the others sent to a spare last row
        # (dropped). The count is read back to the host last, after the scatter is launched, so
        # the GPU works while the host waits on it (read first, the launches after it ran alone)
        places = aten.cumsum.default(keep.to(torch.int64), 0)
        n = keep.shape[0]
        at = torch.where(keep, places - 1, n)
        out = aten.index_put.default(values.new_empty((n + 1, *values.shape[1:])), [at], values)
        count = keep.to(torch.int64).sum().item()
        torch._check(count >= 0)
        torch._check(count <= n)
        return out.narrow(0, 0, count), count  # narrow, not a slice: its size is exactly count

    def compact_static(keep, values, size, fill):
        # the first `size` rows of values that keep marks, in order, the rest `fill`: kept rows
        # past size go to the spare last row too
        at = aten.cumsum.default(keep.to(torch.int64), 0) - 1
        at = torch.where(keep & (at < size), at, size)
        out = values.new_full((size + 1, *values.shape[1:]), fill)
        return aten.slice.Tensor(aten.index_put.default(out, [at], values), 0, 0, size)

    def flat_positions(self):
        # the row-major positions of self's nonzero elements, and how many
        keep = (self != 0).reshape(-1)
        return compact(keep, torch.arange(keep.shape[0], device=self.device))

    def nonzero(self):
        # the kept positions compacted, then each one's coordinates (over the kept ones only)
        return unravel(flat_positions(self)[0], self.shape)

    def nonzero_static(self, size, fill_value=-1):
        keep = (self != 0).reshape(-1)
        at = compact_static(keep, torch.arange(keep.shape[0], device=self.device), size, -1)  # -1: none
        return torch.where((at >= 0).unsqueeze(1), unravel(at, self.shape), fill_value)

    def masked_select(self, mask):
        shape = torch.broadcast_shapes(self.shape, mask.shape)
        keep = mask.expand(shape).reshape(-1)
        return compact(keep, self.expand(shape).reshape(-1))[0]

    def unique(flat, consecutive, return_inverse, return_counts, shape):
        # runs of equal values in the sorted (or, consecutive, the given) order: a run starts where
        # a value differs from the one before, each run's first value compacted; the inverse is
        # every element's run (a cumsum of the starts, sent back through the sort's permutation),
        # the counts a sum of ones per run. Not asked for: empty, as PyTorch returns them
        if consecutive:
            ordered = flat
        else:
            ordered, order = aten.sort.default(flat)
        starts = torch.cat([torch.ones(1, dtype=torch.bool, device=flat.device), ordered[1:] != ordered[:-1]])
        values, run, counts = runs(starts, ordered, return_counts)
        inverse = run.new_zeros(0)
        if return_inverse:
            inverse = run if consecutive else aten.index_put.default(torch.zeros_like(run), [order], run)
            inverse = inverse.view(shape)
        return values, inverse, counts

    def runs(starts, values, return_counts):
        # the runs `starts` begins (True at each run's first element): the value at each run's
        # start, compacted; every element's run (a cumsum of the starts); each run's length (ones
        # summed per run), empty when not asked for, as PyTorch returns it
        firsts, count = compact(starts, values)
        run = aten.cumsum.default(starts.to(torch.int64), 0) - 1
        counts = run.new_zeros(0)
        if return_counts:
            counts = aten.index_put.default(run.new_zeros(count), [run], torch.ones_like(run), True)
        return firsts, run, counts

    def unique2(self, sorted=True, return_inverse=False, return_counts=False):
        # sorted=False leaves the order to the implementation: PyTorch's CPU and CUDA kernels sort
        return unique(self.reshape(-1), False, return_inverse, return_counts, self.shape)

    def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
        if dim is None:
            return unique(self.reshape(-1), True, return_inverse, return_counts, self.shape)
        # runs of equal slices along dim: a run starts where any element of a slice differs from
        # the slice before; the runs' first slices read at their compacted positions
        rows = self.movedim(dim, 0).reshape(self.shape[dim], -1)
        differs = (rows[1:] != rows[:-1]).any(1) if rows.shape[1] else rows.new_zeros(rows.shape[0] - 1, dtype=torch.bool)
        starts = torch.cat([torch.ones(1, dtype=torch.bool, device=self.device), differs])
        first, run, counts = runs(starts, torch.arange(starts.shape[0], device=self.device), return_counts)
        return aten.index_select.default(self, dim, first), run if return_inverse else run.new_zeros(0), counts

    def repeat_interleave(repeats, output_size=None):
        # the source of each output position (repeat_interleave(x, repeats) is x.index_select of
        # it): each source's first position (an exclusive cumsum of the repeats) marked, adding
        # (a source repeated 0 times shares its mark with the next), then a cumsum of the marks
        total = output_size
        if total is None:
            total = repeats.sum().item()
            torch._check(total >= 0)
        starts = aten.cumsum.default(repeats, 0) - repeats
        marks = aten.index_put.default(repeats.new_zeros(total + 1), [starts], torch.ones_like(repeats), True)
        return (aten.cumsum.default(marks.narrow(0, 0, total), 0) - 1).to(repeats.dtype)

    def index(self, indices):
        # a boolean mask (x[mask]) is the positions it marks: nonzero's columns, one for each
        # dimension it covers (PyTorch's rule), leaving the integer indexing the vocabulary covers
        masks = [i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices]
        if not any(masks):
            return NotImplemented  # integer indices stay as they are (the vocabulary's `index`)
        at = masks.index(True)
        if sum(i is not None for i in indices) == 1 and indices[at].dim() > 0:  # one mask, the other dims whole
            mask = indices[at]
            if at == 0 and mask.dim() == self.dim():  # every dim: the kept elements themselves
                return masked_select(self, mask.to(torch.bool))
            # the mask's dims as one, indexed by its kept positions (no coordinates to build)
            rows = self.flatten(at, at + mask.dim() - 1)
            return aten.index.Tensor(rows, [None] * at + [flat_positions(mask)[0]])
        out = []
        for i, masked in zip(indices, masks):
            out += list(nonzero(i).unbind(1)) if masked else [i]
        return aten.index.Tensor(self, out)

    def pinv(self, atol=None, rtol=None, hermitian=False):
        # PyTorch's linalg_pinv written out: V S^+ U^T from the SVD (hermitian: U S^+ U^T from
        # eigh), S^+ the reciprocals of the values above max(atol, rtol * the largest), rtol by
        # default eps * max(m, n) (0 where atol > 0 is given)
        def tensor(v):  # in float64, as PyTorch's get_atol_rtol: the comparison promotes
            return v.to(torch.float64) if isinstance(v, torch.Tensor) else torch.full((), v, dtype=torch.float64,
                                                                                      device=self.device)

        if rtol is None:
            default = torch.finfo(self.dtype).eps * max(self.shape[-1], self.shape[-2])
            rtol = default if atol is None else torch.where(tensor(atol) > 0, tensor(0.0), tensor(default))
        atol, rtol = tensor(0.0 if atol is None else atol), tensor(rtol)
        if hermitian:
            values, u = aten._linalg_eigh.default(self, "L", True)
            size, v = values.abs(), u
            largest = size.amax(-1, keepdim=True)
        else:
            u, values, vh = aten._linalg_svd.default(self, False, True)
            size, v = values, vh.mT
            largest = values[..., :1]
        tol = torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * largest)
        inverse = torch.where(size > tol, values.reciprocal(), 0.0)
        return torch.matmul(v * inverse.unsqueeze(-2), u.mT)

    def cdist(x1, x2, p=2.0, compute_mode=None):
        # every pair's p-norm distance from the broadcast differences, reduced over features
        # (PyTorch's matrix-product form for p = 2 rounds differently; the direct sum is closer)
        diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
        if p == 0:
            return (diff != 0).to(x1.dtype).sum(-1)
        if p == float("inf"):
            return diff.amax(-1)
        if p == 1:
            return diff.sum(-1)
        if p == 2:
            return (diff * diff).sum(-1).sqrt()
        return diff.pow(p).sum(-1).pow(1.0 / p)

    def grid_sampler_3d(self, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
        # PyTorch's 3-D kernels written out as its 2-D decomposition is (trilinear or nearest;
        # zeros, border or reflection padding): each output point's source coordinates, then the
        # input read at the 8 corners (or the nearest) with advanced indexing, each weighted,
        # summed in the kernels' order (tnw, tne, tsw, tse, bnw, bne, bsw, bse)
        if interpolation_mode not in (0, 1):
            raise ValueError("grid_sampler_3d: trilinear or nearest only")  # (PyTorch's too)
        n, c, depth, height, width = self.shape

        def reflect(x, twice_low, twice_high):
            if twice_low == twice_high:
                return torch.zeros_like(x)
            low, span = twice_low / 2, (twice_high - twice_low) / 2
            x = (x - low).abs()
            extra = torch.fmod(x, span)
            even = torch.fmod((x / span).floor(), 2) == 0
            return torch.where(even, extra + low, span + low - extra)

        def source(x, size):  # (unnormalised as the kernels do: the two forms round apart at .5)
            x = (x + 1) / 2 * (size - 1) if align_corners else ((x + 1) * size - 1) / 2
            if padding_mode == 1:
                return x.clamp(0, size - 1)
            if padding_mode == 2:
                x = reflect(x, 0, 2 * (size - 1)) if align_corners else reflect(x, -1, 2 * size - 1)
                return x.clamp(0, size - 1)
            return x

        points = grid.unsqueeze(1)  # (N, 1, D', H', W', 3): broadcast over the channels
        ix, iy, iz = (source(points[..., k], size) for k, size in enumerate((width, height, depth)))
        batch = torch.arange(n, device=self.device).view(n, 1, 1, 1, 1)
        chan = torch.arange(c, device=self.device).view(1, c, 1, 1, 1)

        def read(x, y, z, weight=None):
            inside = (x >= 0) & (x < width) & (y >= 0) & (y < height) & (z >= 0) & (z < depth)
            at = [torch.where(inside, t, 0).to(torch.int64) for t in (z, y, x)]
            value = self[batch, chan, at[0], at[1], at[2]]
            return torch.where(inside, value if weight is None else value * weight, 0)

        if interpolation_mode == 1:
            return read(ix.round(), iy.round(), iz.round())
        x0, y0, z0 = ix.floor(), iy.floor(), iz.floor()
        x1, y1, z1 = x0 + 1, y0 + 1, z0 + 1
        corners = [(x0, y0, z0, (x1 - ix) * (y1 - iy) * (z1 - iz)), (x1, y0, z0, (ix - x0) * (y1 - iy) * (z1 - iz)),
                   (x0, y1, z0, (x1 - ix) * (iy - y0) * (z1 - iz)), (x1, y1, z0, (ix - x0) * (iy - y0) * (z1 - iz)),
                   (x0, y0, z1, (x1 - ix) * (y1 - iy) * (iz - z0)), (x1, y0, z1, (ix - x0) * (y1 - iy) * (iz - z0)),
                   (x0, y1, z1, (x1 - ix) * (iy - y0) * (iz - z0)), (x1, y1, z1, (ix - x0) * (iy - y0) * (iz - z0))]
        return functools.reduce(torch.add, (read(*corner) for corner in corners))

    def histc(self, bins=100, min=0, max=0):
        # PyTorch's kernels (CPU's linear interpolation, CUDA's getBin) put x in bin
        # int((x - lo) * bins / (hi - lo)), the last bin closed; x outside [lo, hi] (and NaN) is
        # not counted. Floats compute it in x's dtype; integers (CUDA only) in int64, min and max
        # truncated to integers first, the division exact. lo and hi are min and max, or x's
        # extrema where they are equal, widened by one each way where those are equal too. The
        # counts accumulate as index_put, in x's dtype.
        x = self.reshape(-1)
        exact = not x.dtype.is_floating_point  # (`_histc_lowerable`: float32, float64 or an integer)
        if exact:
            x, min, max = x.to(torch.int64), int(min), int(max)
        if min == max:
            lo, hi = x.min(), x.max()
            same = lo == hi
            lo, hi = torch.where(same, lo - 1, lo), torch.where(same, hi + 1, hi)
        else:  # in x's dtype, as the kernels take them
            lo, hi = x.new_full((), min), x.new_full((), max)
        keep = (x >= lo) & (x <= hi)
        if exact:
            at = torch.div((x - lo) * bins, hi - lo, rounding_mode="floor").clamp(0, bins - 1)
        else:
            at = ((x - lo) * bins / (hi - lo)).clamp(0, bins - 1)
        at = torch.where(keep, at, 0).to(torch.int64)
        return aten.index_put.default(self.new_zeros(bins), [at], keep.to(self.dtype), True)

    def copy(self, src, non_blocking=False):
        # functional copy_ (what functionalisation leaves of `out[...] = src`, `zeros_like(x).copy_(x)`):
        # self's values are all overwritten, so the result is src cast to self's dtype, broadcast
        if src.dtype != self.dtype:
            src = aten._to_copy.default(src, dtype=self.dtype)
        return aten.clone.default(src.expand(self.shape))

    return {aten.index_reduce.default: index_reduce,
            aten.copy.default: copy,
            aten.put.default: put, aten.masked_scatter.default: masked_scatter,
            aten.adaptive_max_pool2d.default: adaptive_max_pool,
            aten.adaptive_max_pool3d.default: adaptive_max_pool, aten.bilinear.default: bilinear,
            aten.addbmm.default: addbmm, aten.as_strided_scatter.default: as_strided_scatter,
            aten.diagonal_scatter.default: diagonal_scatter, aten.nonzero.default: nonzero,
            aten.nonzero_static.default: nonzero_static, aten.masked_select.default: masked_select,
            aten.index.Tensor: index, aten.linalg_pinv.atol_rtol_tensor: pinv, aten.linalg_pinv.atol_rtol_float: pinv,
            aten._cdist_forward.default: cdist, aten.cdist.default: cdist, aten._unique2.default: unique2,
            aten.unique_consecutive.default: unique_consecutive, aten.index_put.default: index_put,
            aten.repeat_interleave.Tensor: repeat_interleave, aten.histc.default: histc,
            aten.grid_sampler_3d.default: grid_sampler_3d}


def _covered(g: Graph) -> Counter:
    """The covered operators on floating-point values that the result needs. Lowering runs the
    whole program through functionalisation, which respells a few (batch_norm ->
    _native_batch_norm_legit_no_training): a lowering that loses one is not kept. Integer index
    arithmetic (arange + 0), casts to the dtype a value already has, a cat of one tensor (a
    key/value cache's first step, which becomes a clone) and what the result does not need
    (RWKV's state, updated in place and not returned, which functionalisation drops) may go."""
    def copy(n: Node) -> bool:
        return n.op == "cat" and len(n.args[0]) == 1

    live = _live(g)
    return Counter(n.op for n in g.nodes if n.op is not None and n.op != "to_dtype" and not copy(n)
                   and n.name in live and "float" in g.values.get(n.outputs[0], Value("", [], "", "")).dtype)


def _live(g: Graph) -> set[str]:
    """The names of the nodes the roots need: what computes them, and what writes in place into
    a tensor (or a view of one) that a needed node reads later (`x.sub_(y)`, `x[:, 0].copy_(y)`).
    One pass from the end: the nodes are in program order, so a write is visited before the
    reads that come before it, which do not make it needed (RWKV's state: read, then written
    for a next call that never comes)."""
    producer = g.producer()

    def base(v: str) -> str:  # the tensor a view's reads and writes land in
        while v in producer and producer[v].target in VIEWS:
            ins = value_refs(producer[v].args)
            if not ins:
                break
            v = ins[0]
        return v

    live, needed = set(), set(g.roots())
    for n in reversed(g.nodes):
        ins = value_refs(n.args) + value_refs(list(n.kwargs.values()))
        if any(o in needed for o in n.outputs) or (_in_place(n.target) and ins and base(ins[0]) in needed):
            live.add(n.name)
            needed.update(ins)
            needed.update(base(v) for v in ins)
    return live


def _in_place(target: str) -> bool:
    """An aten operator writing into its first argument (`sub_`, `copy_`; not `__and__`)."""
    name = target.split(".")[1] if target.count(".") == 2 else ""
    return name.endswith("_") and not name.startswith("__")


def access_path(model, fqn: str) -> str:
    """How generated code reaches the parameter or buffer `fqn` from `self`: attribute access
    where the name is an identifier, indexing into containers (`self.net[0].weight`,
    `self.blocks["a"].bias`), `getattr` otherwise. Resolved on every call, so `.to()`,
    `load_state_dict` and replaced buffers are seen as they are."""
    import keyword

    import torch.nn as nn

    expr, obj = "self", model
    for part in fqn.split("."):
        if part.isidentifier() and not keyword.iskeyword(part):
            expr = f"{expr}.{part}"
        elif part.isdigit() and isinstance(obj, (nn.Sequential, nn.ModuleList, nn.ParameterList)):
            expr = f"{expr}[{part}]"
        elif isinstance(obj, (nn.ModuleDict, nn.ParameterDict)):
            expr = f"{expr}[{part!r}]"
        else:
            expr = f"getattr({expr}, {part!r})"
        obj = getattr(obj, part)
    return expr


def _rename_inputs(graph: Graph, names: dict[str, str]) -> Graph:
    names = {old: new for old, new in names.items() if old != new}
    if not names:
        return graph

    values = {}
    for key, v in graph.values.items():
        if key in names:
            v.name = names[key]
        values[names.get(key, key)] = v
    for n in graph.nodes:
        n.args = renamed_refs(n.args, names)
        n.kwargs = {k: renamed_refs(a, names) for k, a in n.kwargs.items()}
    return Graph(values, graph.nodes, [names.get(i, i) for i in graph.inputs],
                 [names.get(o, o) for o in graph.outputs],
                 [Check(names.get(c.value, c.value), c.message) for c in graph.checks])


def unknown_constants(graph: Graph) -> list[str]:
    """Constant tensors whose values a meta-device capture could not see."""
    return [v.name for v in graph.values.values() if v.kind == "const" and v.literal is None]


def _dtype(t) -> str:
    """`torch.float32` for tensors; `int`, `float`, `bool` for Python scalars (symbolic ones too)."""
    if hasattr(t, "dtype"):
        return str(t.dtype)
    return {"SymInt": "int", "SymFloat": "float", "SymBool": "bool"}.get(type(t).__name__, type(t).__name__)


def _hint(value):
    """A size (or other number) as the example inputs have it: symbolic ones carry it."""
    return value if isinstance(value, (int, float, bool)) else value.node.hint


def _shape(t) -> list[int]:
    return [_hint(s) for s in t.shape] if hasattr(t, "shape") else []


def _symbolic(t) -> list[int]:
    """The dims of `t` whose size is a symbol (not a number once simplified)."""
    return [d for d, s in enumerate(getattr(t, "shape", ())) if not isinstance(s, int) and s.node.maybe_as_int() is None]


def _target(fn) -> str:
    """`aten.view.default` for operators; for the Python functions on sizes that tracing keeps
    (B * 4, B // 2, sym_max) the dotted name generated code calls them by: `operator.mul`,
    `torch.sym_max`, `builtins.float`."""
    if hasattr(fn, "_schema"):
        return str(fn)
    module = getattr(fn, "__module__", None) or "builtins"
    module = "operator" if module == "_operator" else module
    return f"{module}.{getattr(fn, '__name__', fn)}"


def _without_legacy_empty(tensors: list, values: dict) -> list:
    """cat's tensors without the 1-D empty ones beside tensors of other ranks, which torch.cat
    skips (a legacy rule: a key/value cache that starts as `torch.tensor([])`, as transformers'
    DynamicCache does, concatenated with the first keys)."""
    shapes = [values[t["value"]].shape if isinstance(t, dict) and t.get("value") in values else None
              for t in tensors]
    kept = [t for t, shape in zip(tensors, shapes) if shape != [0] or values[t["value"]].symbolic]
    if kept and len(kept) < len(tensors) and any(shape is not None and len(shape) != 1 for shape in shapes):
        return kept
    return tensors


def _fresh(name: str, values: dict, nodes: list) -> bool:
    """A value forward computes into memory of its own, laid out contiguously: not an input or
    parameter, not a view (later views of a copy may rely on its layout: Bloom's reshapes)."""
    if values[name].kind != "node":
        return False
    producer = _producer(name, nodes)
    return producer is not None and producer.op is not None and producer.target not in VIEWS


#: views that need their tensor's layout: the same elements in another shape only where the
#: strides allow it (a reshape copies where they do not)
LAYOUT_VIEWS = {"aten.view.default", "aten._unsafe_view.default", "aten.as_strided.default", "aten.view.dtype",
                "aten.view_as.default"}
#: operators whose result is laid out anew, contiguous whatever their input's strides (a clone
#: only with the contiguous format: reshape's copy is that clone, then `_unsafe_view`)
_NEW_LAYOUT = {"aten.contiguous.default", "aten.mm.default", "aten.bmm.default", "aten.matmul.default",
               "aten.linear.default", "aten.addmm.default", "aten.baddbmm.default"}


def _view_of_fresh(name: str, values: dict, nodes: list) -> bool:
    """A view (through views only) of a value forward computes into memory of its own."""
    producer = _producer(name, nodes)
    if producer is None or producer.target not in VIEWS:
        return False
    while producer is not None and producer.target in VIEWS:
        refs = value_refs(producer.args)
        if not refs:
            return False
        name = refs[0]
        producer = _producer(name, nodes)
    return _fresh(name, values, nodes)


def _producer(name: str, nodes: list):
    return next((n for n in reversed(nodes) if name in n.outputs), None)


def _layout_free(fx_node, limit: int = 256) -> bool:
    """Whether nothing after `fx_node` relies on its layout. Its users are followed (views,
    elementwise operators and PyTorch's fallbacks keep an input's strides; `getitem` and eval-mode
    dropout alias) up to those that lay their result out anew (a matrix product, `contiguous`);
    none on the way may be a layout view (`view`), write in place or be the graph's output."""
    need, seen = [fx_node], set()
    while need:
        for user in need.pop().users:
            if user.op != "call_function" or len(seen) > limit:
                return False  # the graph's output (or too far to follow)
            target = _target(user.target)
            if target in LAYOUT_VIEWS or target.split(".")[-2].endswith("_"):
                return False
            fresh = target in _NEW_LAYOUT or (
                target == "aten.clone.default" and str(user.kwargs.get("memory_format")) == "torch.contiguous_format")
            if not fresh and user not in seen:
                seen.add(user)
                need.append(user)
    return True


def _convert(ep) -> Graph:
    import torch
    from torch.export.graph_signature import InputKind

    from .ops.aten import ARGS_ORDER, SymbolicSize, match

    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    constants = getattr(ep, "constants", {})
    values: dict[str, Value] = {}
    nodes: list[Node] = []
    inputs: list[str] = []
    alias: dict[str, str] = {}  # getitem node name -> the value it selects
    checks: list[Check] = []
    user_index = 0

    def ref(a):
        if isinstance(a, torch.fx.Node):
            return {"value": alias.get(a.name, a.name)}
        if isinstance(a, (list, tuple)):
            return [ref(x) for x in a]
        if isinstance(a, torch.device):
            # traced on the meta device: generated code creates tensors where its inputs live
            return {"device": str(a)}
        if isinstance(a, (torch.dtype, torch.memory_format, torch.layout)):
            return str(a)
        if isinstance(a, (int, float, bool, str)) or a is None:
            return a
        raise CaptureError(f"unsupported argument {a!r}")

    for n in ep.graph.nodes:
        if n.op == "placeholder":
            val = n.meta.get("val")
            spec = specs.get(n.name)
            kind = {InputKind.PARAMETER: "param", InputKind.BUFFER: "buffer",
                    InputKind.CONSTANT_TENSOR: "const"}.get(spec.kind if spec else None, "input")
            v = Value(n.name, _shape(val), _dtype(val), kind, fqn=spec.target if spec and kind != "input" else None,
                      symbolic=_symbolic(val))
            if kind == "input":
                v.symbols = [str(val.shape[d]) for d in v.symbolic]
                v.index = user_index
                user_index += 1
                inputs.append(n.name)
            if kind == "const":
                c = constants.get(spec.target)
                if c is not None and not c.is_meta and c.numel() <= MAX_CONSTANT_ELEMENTS:
                    # torch.tensor(2.0) in forward: a scalar; torch.tensor([1., 2.]) or torch.tensor([2]):
                    # its values, nested as its shape (an index of one position keeps its axis)
                    v.literal = c.item() if c.dim() == 0 else c.tolist()
            values[n.name] = v
        elif n.op == "call_function":
            if _untraced(n):
                raise CaptureError(f"forward uses {getattr(n.target, '__name__', n.target)} (torch.cond, vmap...), "
                                   "which capture does not take apart")
            if n.target is operator.getitem:
                parent, i = n.args
                alias[n.name] = f"{parent.name}.{i}" if isinstance(parent.meta.get("val"), (tuple, list)) else parent.name
                continue
            if n.target in (torch.ops.aten._assert_async.msg, torch.ops.aten._assert_async.default):
                # a condition forward checks (a branch taken as at capture: `_Replay`), kept
                cond = ref(n.args[0])
                if isinstance(cond, dict):
                    checks.append(Check(cond["value"], n.args[1] if len(n.args) > 1 else "assertion failed"))
                continue
            val = n.meta.get("val")
            if val is None:  # checks with no result (aten._assert_tensor_metadata): nothing to run
                continue
            target = _target(n.target)
            source = ref(n.args[0]) if n.args else None
            if target in _CONSTANT_IDENTITIES and isinstance(source, dict) \
                    and values[source["value"]].kind == "const":
                alias[n.name] = source["value"]
                continue
            if target == "aten.dropout.default" and len(n.args) == 3 and n.args[2] is False:
                alias[n.name] = source["value"]  # dropout outside training: the input itself
                continue
            args = ref(list(n.args))
            if target == "aten.cat.default":
                args[0] = _without_legacy_empty(args[0], values)
                if len(args[0]) == 1 and (_fresh(args[0][0]["value"], values, nodes)
                                          or _view_of_fresh(args[0][0]["value"], values, nodes) and _layout_free(n)):
                    # a contiguous copy of a fresh value, or of a view of one whose copy's layout
                    # nothing after it relies on (DynamicCache's first `cat` of a layer's values): itself
                    alias[n.name] = args[0][0]["value"]
                    continue
            outs = list(val) if isinstance(val, (tuple, list)) else [val]
            # a tuple result's parts are "<node>.<i>", as getitem refers to them (one part too)
            names = [f"{n.name}.{i}" for i in range(len(outs))] if isinstance(val, (tuple, list)) else [n.name]
            for name, o in zip(names, outs):
                if o is not None and hasattr(o, "shape"):
                    values[name] = Value(name, _shape(o), _dtype(o), "node", symbolic=_symbolic(o))
                elif isinstance(o, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
                    # a size: x.shape[0], B * 4; `literal` is its value for the example inputs
                    values[name] = Value(name, [], _dtype(o), "node", literal=_hint(o))
            # In place on the module's state (num_batches_tracked += 1) is a side effect, not part of
            # the result; in place on a value forward computed (y.relu_(), y.detach_()) is.
            in_place = _in_place(target)
            on_state = isinstance(source, dict) and values[source["value"]].kind in ("param", "buffer")
            node = Node(n.name, target, args, {k: ref(v) for k, v in n.kwargs.items()}, names,
                        mutates=in_place and on_state)
            try:
                m = None if is_scalar(node, values) else match(node, values)
            except SymbolicSize:  # an attribute from a symbolic size: `_trace` traces it static
                raise
            except Exception:  # arguments the vocabulary does not expect (symbolic sizes)
                m = None
            if m is not None:
                node.op, node.attrs = m
                if target in ARGS_ORDER:
                    node.args = [node.args[i] for i in ARGS_ORDER[target]]
            nodes.append(node)
        elif n.op == "output":
            # Buffer mutations (batch-norm statistics) come first; the user's outputs follow.
            results = [alias.get(a.name, a.name) if isinstance(a, torch.fx.Node) else None for a in n.args[0]]
            outputs = [r for r, s in zip(results, ep.graph_signature.output_specs)
                       if s.kind.name == "USER_OUTPUT"]
    if any(o is None for o in outputs):
        raise CaptureError("the module returns something other than tensors")
    return Graph(values, nodes, inputs, outputs, checks)
