"""Values forward computes from its inputs' shapes alone, made once per input shape (issue 17).

Masks and positions built from sizes (a causal mask from `arange`, Swin's shifted-window mask
and its rolls' indices, T5's relative-position buckets) read no tensor's data: for one set of
input shapes, dtypes and devices they are the same on every call. Inductor folds such values
into constants where shapes are static. Here forward computes them on the first call with a
given key and keeps them on the module (the last 8 keys), so later calls skip their
kernels, allocations and Python. Swin-T computes two thirds of its operators this way.

A value is shape-only when its node reads nothing but constants, forward's non-tensor
arguments, sizes, other shape-only values, and tensors' metadata (the `x` of `new_zeros(x, ..)`
or `x.size(0)`) whose shapes the inputs' shapes fix (not a compaction's count). Random
operators never are. A value some kernel writes into in place, or that forward returns (the
caller may change it), is not, nor is what it views. A fragment is computed once per shape when
everything it computes is shape-only.

The generated forward keeps its order; each such fragment runs only on a miss:

    _key = (x.shape, x.dtype, x.device, torch.is_inference_mode_enabled())
    _kept = _per_shape(self)
    _shaped = _kept.get(_key)
    if _shaped is not None:
        mask, pos = _shaped
    ...
    if _shaped is None:
        <the fragments computing mask and pos>
        _keep(_kept, _key, (mask, pos))
"""

from __future__ import annotations

import ast

from ..capture import viewed, writes_in_place
from .program import Fragment, Program

#: operators reading only their first input's metadata (its shape, dtype, device)
METADATA_READS = {
    "aten.sym_size.int", "aten.sym_numel.default",
    "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default", "aten.new_empty.default",
    "aten.new_empty_strided.default", "aten.zeros_like.default", "aten.ones_like.default",
    "aten.full_like.default", "aten.empty_like.default",
}
#: parts of the names of operators that draw random numbers: never the same twice
_RANDOM = ("rand", "bernoulli", "normal", "uniform", "dropout", "multinomial", "poisson", "exponential",
           "geometric", "cauchy", "log_normal", "rrelu")
#: the operators whose kernel may write into its input (`emit.scatter.writable`)
_SCATTERS = {"scatter", "index_put"}


def per_shape(module) -> dict:
    """The module's values computed from input shapes alone, by key (made on first use). Copied
    into generated modules as `_per_shape`."""
    kept = getattr(module, "_per_shape_values", None)
    if kept is None:
        kept = module._per_shape_values = {}
    return kept


def keep(kept: dict, key, values: tuple) -> None:
    """Keeps `values` under `key`; past 8 keys the oldest goes (a decoder called at a new
    length each step would otherwise keep every length's). Copied as `_keep`."""
    if len(kept) >= 8:
        kept.pop(next(iter(kept)))
    kept[key] = values


def shape_only(program: Program) -> set[str]:
    """The values forward computes from its inputs' shapes (and dtypes, devices, non-tensor
    arguments) alone."""
    held = _held(program)
    only: set[str] = set()
    for n in program.nodes:
        if n.mutates or any(part in n.target for part in _RANDOM) or any(o in held for o in n.outputs):
            continue
        ins = program.inputs_of(n)
        meta = ins[:1] if n.target in METADATA_READS else []
        if all(v in only or _fixed(program, v) or (v in meta and _sized_by_inputs(program, v)) for v in ins):
            only.update(n.outputs)
    return only


def hoisted(program: Program, frag: Fragment, only: set[str]) -> bool:
    """Whether `frag` computes only shape-only values (and at least one tensor)."""
    outs = [o for n in frag.nodes for o in n.outputs]
    return all(o in only for o in outs) and any(program.is_tensor(o) for o in outs if o in program.values)


def forward_lines(program: Program, blocks: list[tuple[list[str], bool]], only: set[str],
                  after: list[str] = ()) -> list[str]:
    """Forward's lines from each fragment's (lines, hoisted), then `after` (the checks): the
    hoisted ones run only where the module has no values for this call's key yet; the values
    the others read are kept. `only`: the shape-only values (`shape_only`)."""
    if not any(h for _, h in blocks) or not _keyable(program):
        return [line for lines, _ in blocks for line in lines] + list(after)
    kept = _kept_names(blocks + [(list(after), False)])
    # the inputs' shapes, dtypes and devices (and those of the parameters whose own are read)
    tensors = [v for v in program.graph.inputs if program.is_tensor(v)] + _metadata_read(program, only)
    key = [f"{e}.shape, {e}.dtype, {e}.device" for e in map(program.expr, tensors)] + \
          [program.expr(v) for v in program.graph.inputs if not program.is_tensor(v)]
    out = [f"_key = ({', '.join(key + ['torch.is_inference_mode_enabled()'])})",
           "_kept = _per_shape(self)",
           "_shaped = _kept.get(_key)"]
    if kept:
        out += ["if _shaped is not None:", f"    {', '.join(kept)}, = _shaped"]
    last = max(i for i, (_, h) in enumerate(blocks) if h)
    run: list[str] = []  # hoisted lines not yet written
    for i, (lines, h) in enumerate(blocks):
        if h:
            run += lines
        if run and (not h or i == last):
            if i == last:
                run.append(f"_keep(_kept, _key, ({''.join(f'{v}, ' for v in kept)}))")
            out += ["if _shaped is None:  # computed from the input shapes alone: once per shape"]
            out += [f"    {line}" for chunk in run for line in chunk.split("\n")]
            run = []
        if not h:
            out += lines
    return out + list(after)


def _held(program: Program) -> set[str]:
    """Values that must be fresh each call: what forward returns or a kernel writes into (an
    in-place operator; a scatter into a fresh allocation, `emit.scatter.writable`), and every
    value they view."""
    from .emit.scatter import writable

    written = [program.inputs_of(n)[0] for n in program.nodes if program.inputs_of(n) and (
        writes_in_place(n) or (n.op in _SCATTERS and writable(program, n, program.inputs_of(n)[0])))]
    return viewed(list(program.roots) + written, program.producer)


def _fixed(program: Program, value: str) -> bool:
    """A constant written into forward, or an argument of forward that is no tensor (part of
    the key). (A tensor attribute lifted as a constant, with no literal, may be changed.)"""
    v = program.values[value]
    return (v.kind == "const" and v.literal is not None) or (v.kind == "input" and not program.is_tensor(value))


def _sized_by_inputs(program: Program, value: str) -> bool:
    """A tensor whose shape the inputs' shapes fix (not a count only the data gives)."""
    return None not in program.values[value].shape


def _keyable(program: Program) -> bool:
    """Whether every argument of forward can be part of a key: tensors by shape, dtype and
    device; numbers, booleans, strings and None by value."""
    return all(program.is_tensor(v) or program.values[v].dtype in ("int", "float", "bool", "str", "NoneType")
               for v in program.graph.inputs)


def _metadata_read(program: Program, only: set[str]) -> list[str]:
    """The parameters and buffers whose shape, dtype or device a shape-only value reads (a
    `new_zeros` of a weight): part of the key, as a module moved or cast changes them."""
    out = []
    for n in program.nodes:
        if n.target in METADATA_READS and n.outputs[0] in only:
            x = program.inputs_of(n)[0]
            if program.values[x].kind in ("param", "buffer") and x not in out:
                out.append(x)
    return out


def _kept_names(blocks: list[tuple[list[str], bool]]) -> list[str]:
    """The names a hoisted block assigns that a later block reads while the hoisted block's
    value is the last assigned (a fragment's own temporaries, `_n` and `_grid`, it assigns
    first: they need not be kept)."""
    hoisted_last: dict[str, bool] = {}  # name -> whether a hoisted block assigned it last
    kept: set[str] = set()
    for lines, hoisted in blocks:
        tree = ast.parse("\n".join(lines))
        if hoisted:
            hoisted_last.update({n.id: True for n in ast.walk(tree) if isinstance(n, ast.Name)
                                 and isinstance(n.ctx, ast.Store)})
            continue
        for stmt in tree.body:
            kept |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                     and hoisted_last.get(n.id)}
            if isinstance(stmt, ast.Assign):  # (an assignment inside an `if` may not run)
                hoisted_last.update({n.id: False for t in stmt.targets for n in ast.walk(t)
                                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
    return sorted(kept)
