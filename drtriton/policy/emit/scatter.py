"""The store side of indexing (scatter, scatter_add, scatter_reduce, index_put; and what capture
lowers to them: index_add, index_copy, index_fill, index_reduce, put, max_unpool),
as Inductor lowers it: the output starts as a copy of the input, then one kernel runs over the
elements of the source (the index's shape for scatter, the indexed shape for index_put), finds
each element's place in the output from the index tensor(s) through strides, and stores it there.

How an element lands depends on the operator:

- scatter, index_put: a plain store (where indices repeat, one of the elements wins, as on a
  GPU in PyTorch);
- scatter_add, index_put(accumulate=True), scatter_reduce "sum": `tl.atomic_add`, so repeated
  indices all count; "amax" / "amin": `tl.atomic_max` / `tl.atomic_min` (the dtypes Triton has
  them for); "mean": the sum and a count per output element (atomics too), divided after;
  "prod": no Triton atomic multiplies, so Unsupported (PyTorch keeps it in mixed mode).
- include_self=False: a first pass stores the reduction's identity where any element lands.

Negative indices count from the end (PyTorch's rule); an index out of range stores nothing
(PyTorch raises there). When the input is a fresh allocation (zeros) that nothing else reads,
seen through views that keep it contiguous (max_unpool, a compaction's), the kernel writes into it
and the copy is skipped. A pointwise epilogue (and mean's division) runs as a last pass over the
output. Kernels that accumulate are not autotuned: a tuning run would add twice.
"""

from __future__ import annotations

from ...ops.elementwise import _TL_DTYPES
from ...ops.operator import float_source
from ..pointwise import Broadcast, IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import WIDE, Emitted, Names, Unsupported, empty, flat_blocks, stored_values
from .gather import Source, _offset, _tensor, index_tensors

BLOCK, NUM_WARPS = 1024, 4
_TL = {f"torch.{name}": tl for name, tl in _TL_DTYPES.items()}

#: the dtypes Triton's atomics take (atomic_max/min of floats: fp32 and fp64 through integer views)
ATOMIC_ADD = {"torch.float16", "torch.bfloat16", "torch.float32", "torch.float64", "torch.int32", "torch.int64"}
ATOMIC_MINMAX = {"torch.float32", "torch.float64", "torch.int32", "torch.int64"}
_ATOMIC = {"sum": "tl.atomic_add", "mean": "tl.atomic_add", "amax": "tl.atomic_max", "amin": "tl.atomic_min"}

#: views that alias a contiguous tensor as another contiguous tensor (writing through them writes it)
ALIASING_VIEWS = {"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.unsqueeze.default",
                  "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.flatten.using_ints",
                  "aten.unflatten.int", "aten.alias.default"}
#: contiguous allocations (filled, or empty: a compaction's, whose unwritten rest is dropped)
FRESH = {"aten.zeros.default", "aten.ones.default", "aten.full.default", "aten.new_zeros.default",
         "aten.new_ones.default", "aten.new_full.default", "aten.new_empty.default"}


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def _mode(node) -> tuple[str, bool]:
    """(how elements land: store | sum | mean | amax | amin | prod, include_self)."""
    if node.op == "index_put":
        return ("sum" if node.attrs["accumulate"] else "store"), True
    reduce = node.attrs["reduce"]
    return ("store" if reduce == "none" else reduce), node.attrs["include_self"]


def _identity(mode: str, dtype: str) -> str:
    """The value a reduction starts from where include_self=False drops the input's."""
    floating = "float" in dtype
    if mode in ("sum", "mean"):
        return "0.0" if floating else "0"
    if floating:
        return 'float("-inf")' if mode == "amax" else 'float("inf")'
    top = 2 ** (31 if dtype == "torch.int32" else 63) - 1
    return f"-{top} - 1" if mode == "amax" else str(top)


def _literal(value, dtype: str) -> str:
    if "float" in dtype:
        return float_source(float(value))
    if dtype == "torch.bool":
        return "1" if value else "0"
    return repr(int(value))


def _value(program: Program, src: Source, arg, space: IndexSpace, rank: int, dtype: str,
           broadcast: Broadcast | None = None) -> None:
    """The element stored: a tensor read through its strides at the element's position (with a
    `broadcast` to the positions' shape, `_space` in forward: passed with its own strides after a
    check of its shape, stride 0 along the dims it does not vary in), or a number written into
    the kernel. Leaves `val`."""
    if isinstance(arg, dict) and "value" in arg and program.is_tensor(arg["value"]):
        v = arg["value"]
        if program.values[v].dtype != dtype:
            raise Unsupported(f"a {program.values[v].dtype} source stored into {dtype}")
        if len(program.values[v].shape) > rank or (broadcast is None and len(program.values[v].shape) != rank):
            raise Unsupported("a source of another rank than its positions")
        if broadcast is None:
            vs = _tensor(src, "v", program.expr(v), rank)
        else:
            lines, args = broadcast.strided_args(v, "_space", "_v", beside="the positions it is stored at")
            src.checks += lines
            src.params += ["v_ptr"] + [f"v_s{d}" for d in range(rank)]
            src.args += args
            vs = [f"v_s{d}" if d in broadcast.varying(v) else "0" for d in range(rank)]
        pos = _offset([(space.index(d), vs[d]) for d in range(rank) if vs[d] != "0"])
        src.lines.append(f"val = tl.load(v_ptr + {pos}, mask=ok, other=0)")
        return
    if isinstance(arg, dict) and "value" in arg and program.values[arg["value"]].kind == "node":
        # a size forward computed (x.shape[0]): a scalar argument, as it varies with the inputs
        src.params.append("v_scalar")
        src.args.append(program.expr(arg["value"]))
        src.lines.append(f"val = (tl.zeros([BLOCK], {_TL[dtype]}) + v_scalar).to({_TL[dtype]})")
        return
    if isinstance(arg, dict) and "value" in arg:
        arg = program.values[arg["value"]].literal
    if isinstance(arg, bool) or not isinstance(arg, (int, float)):
        raise Unsupported(f"a source that is neither a tensor nor a number ({arg!r})")
    src.lines.append(f"val = tl.full([BLOCK], {_literal(arg, dtype)}, {_TL[dtype]})")


def _wrapped(src: Source, at: str, n: str) -> None:
    """Index `at` counted from the end when negative; `ok` keeps only those in range."""
    src.lines += [f"{at} = tl.where({at} < 0, {at} + {n}, {at})",
                  f"ok = ok & ({at} >= 0) & ({at} < {n})"]


def _scatter(program: Program, node, space: IndexSpace, rank: int, dtype: str) -> Source:
    """scatter(x, dim, index, src): the iteration space is the index's shape; the element at
    position p goes to p with p[dim] replaced by index[p]."""
    src = Source()
    x, dim, index = node.args[0]["value"], node.attrs["dim"], node.args[2]["value"]
    if len(program.values[index].shape) != rank:
        raise Unsupported("a scatter index of another rank than its input")
    xe, ie = program.expr(x), program.expr(index)
    ist = _tensor(src, "idx", ie, rank)
    src.params.append("x_n")
    src.args.append(f"{xe}.shape[{dim}]")
    src.lines += [f"at = tl.load(idx_ptr + {_offset([(space.index(d), ist[d]) for d in range(rank)])}, "
                  "mask=mask, other=0).to(tl.int64)", "ok = mask"]
    _wrapped(src, "at", "x_n")
    src.lines.append("dest = " + _offset([("at" if d == dim else space.index(d), f"out_s{d}") for d in range(rank)]))
    src.out_shape = f"{ie}.shape"
    _value(program, src, node.args[3], space, rank, dtype, None)  # src may be larger than the index
    return src


def _index_put(program: Program, node, space: IndexSpace, rank: int, dtype: str) -> Source:
    """index_put(x, indices, values): the iteration space is the shape x[indices] has (the index
    tensors broadcast together, standing where the indexed axes were when those are adjacent,
    else first: PyTorch's rule); values broadcast to it."""
    src = Source()
    x = node.args[0]["value"]
    xe = program.expr(x)
    x_rank = len(program.values[x].shape)
    entries = list(node.args[1]) + [None] * (x_rank - len(node.args[1]))
    indexed = [d for d, e in enumerate(entries) if e is not None]
    b = max(len(program.values[entries[d]["value"]].shape) for d in indexed)
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    first = indexed[0] if adjacent else 0
    kept = [f"{xe}.shape[{d}]" for d in range(x_rank) if d not in indexed]
    src.out_shape = "[" + ", ".join(kept[:first] + ["*_ishape"] + kept[first:]) + "]"
    src.params += [f"x_n{d}" for d in indexed]
    src.args += [f"{xe}.shape[{d}]" for d in indexed]
    reads = index_tensors(program, src, [entries[d]["value"] for d in indexed], space, first)
    rest = iter(d for d in range(rank) if not first <= d < first + b)
    src.lines.append("ok = mask")
    terms = []
    for d in range(x_rank):
        if d in indexed:
            k = indexed.index(d)
            src.lines.append(f"at{k} = ({reads[k]}).to(tl.int64)")
            _wrapped(src, f"at{k}", f"x_n{d}")
            terms.append((f"at{k}", f"out_s{d}"))
        else:
            terms.append((space.index(next(rest)), f"out_s{d}"))
    src.lines.append(f"dest = {_offset(terms)}")
    # the positions' shape as capture saw it: x's kept dims around the index tensors' broadcast
    xv, ibc = program.values[x], Broadcast.of(program, [entries[d]["value"] for d in indexed])
    kept_dims = [d for d in range(x_rank) if d not in indexed]
    sizes = [xv.shape[d] for d in kept_dims]
    symbolic = {j if j < first else j + b for j, d in enumerate(kept_dims) if d in xv.symbolic}
    positions = Broadcast(program, sizes[:first] + ibc.shape + sizes[first:],
                          symbolic | {first + e for e in ibc.symbolic})
    _value(program, src, node.args[2], space, rank, dtype, positions)
    return src


def writable(program: Program, node, x: str) -> bool:
    """Whether the kernel may write into `x` itself: a fresh, contiguous allocation (zeros, full,
    new_empty), seen through views that keep it contiguous, that nothing else reads (the
    scatter itself reading it as its source or index neither)."""
    if program.inputs_of(node).count(x) != 1:
        return False
    user, v = node, x
    while True:
        if v in program.roots or any(u is not user for u in program.users.get(v, []) if not u.mutates):
            return False
        prod = program.producer.get(v)
        if prod is None:  # an input, a parameter, a constant
            return False
        if prod.target in FRESH:
            return True
        if prod.target not in ALIASING_VIEWS or not prod.args or not isinstance(prod.args[0], dict):
            return False
        user, v = prod, prod.args[0]["value"]


def _kernel(name: str, params: list[str], comment: str, body: list[str]) -> str:
    return "\n".join(["@triton.jit",
                      f"def {name}({', '.join(params)}, WIDE: tl.constexpr, BLOCK: tl.constexpr):",
                      f"    # {comment}",
                      *(f"    {line}" for line in flat_blocks() + body)])


def _launch(name: str, args: list[str], n: str, wide: str) -> list[str]:
    """Forward lines launching a kernel over `n` elements (none when there are none)."""
    return [f"if {n}:",
            f"    {name}[(_cdiv({n}, {BLOCK}),)]({', '.join(args)}, WIDE={wide}, BLOCK={BLOCK}, "
            f"num_warps={NUM_WARPS})"]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    anchor_out = node.outputs[0]
    x = node.args[0]["value"]
    shape = list(program.values[anchor_out].shape)
    dtype = program.values[anchor_out].dtype
    if not shape:
        raise Unsupported("a 0-d result")
    if dtype not in _TL or program.values[x].dtype != dtype:
        raise Unsupported(f"a {dtype} result")
    mode, include_self = _mode(node)
    if mode == "prod":
        raise Unsupported("scatter_reduce prod: Triton has no atomic multiply")
    if mode in ("sum", "mean") and dtype not in ATOMIC_ADD:
        raise Unsupported(f"no Triton atomic_add for {dtype}")
    if mode in ("amax", "amin") and dtype not in ATOMIC_MINMAX:
        raise Unsupported(f"no Triton atomic_{mode[1:]} for {dtype}")
    if mode == "mean" and "float" not in dtype:
        raise Unsupported("an integer scatter mean (PyTorch rounds it down)")
    stores = stored_values(program, frag, shape)
    rank = len(shape)
    xe = program.expr(x)
    tl_dtype = _TL[dtype]

    # -- the scatter: a kernel over the elements of the source ----------------------------------
    if node.op == "scatter":  # the index's shape
        it_rank = len(program.values[node.args[2]["value"]].shape)
    else:  # x's axes, the indexed ones replaced by the index tensors' broadcast shape
        indices = [e for e in node.args[1] if e is not None]
        it_rank = rank - len(indices) + max(len(program.values[e["value"]].shape) for e in indices)
    if not it_rank:
        raise Unsupported("a 0-d index")
    sizes = [f"size{d}" for d in range(1, it_rank)]
    space = IndexSpace(it_rank, "offs", "mask", sizes)
    src = (_scatter if node.op == "scatter" else _index_put)(program, node, space, it_rank, dtype)
    body = space.lines + src.lines

    kernels: list[str] = []
    lines = [f"# {frag.label}: Triton, the output then each source element stored where its index says"]
    out = program.expr(anchor_out) if anchor_out in stores else "_sc_out"
    if writable(program, node, x):
        lines.append(f"{out} = {xe}  # a fresh allocation nothing else reads: written in place")
    else:
        copy = names.kernel(f"{frag.label} copy")
        strided = [f"x_s{d}" for d in range(rank)]
        copy_body = ["src = offs * 0", "rem = offs"]
        for d in reversed(range(rank)):  # the element's index along each axis, innermost first
            copy_body += [f"src += (rem % x_n{d}) * {strided[d]}", f"rem = rem // x_n{d}"]
        copy_body.append("tl.store(out_ptr + offs, tl.load(x_ptr + src, mask=mask), mask=mask)")
        kernels.append(_kernel(copy, ["x_ptr", "out_ptr", "n"] + [f"x_n{d}" for d in range(rank)] + strided,
                           "out (contiguous) = x read through its sizes and strides", copy_body))
        lines.append(f"{out} = {empty(f'{xe}.shape', rank, f'{xe}.device', dtype)}")
        lines += _launch(copy, [xe, out, f"{out}.numel()", f"*{xe}.shape", f"*{xe}.stride()"], f"{out}.numel()",
                         f"{out}.numel() > {WIDE}")
    lines += src.prelude
    lines.append(f"_space = {src.out_shape}")
    lines += src.checks
    lines.append("_n = math.prod(_space)")
    out_params = ["out_ptr"] + [f"out_s{d}" for d in range(rank)]
    out_args = [out, f"*{out}.stride()"]
    wide = f"max(_n, {out}.numel()) > {WIDE}"
    common = out_params + src.params + ["n"] + sizes
    common_args = out_args + src.args + ["_n"] + (["*_space[1:]"] if sizes else [])
    where = space.lines + src.lines[:-1]  # the destination lines, without the value's (`_value`: the last)
    if not include_self and mode != "store":
        first = names.kernel(f"{frag.label} identity")
        kernels.append(_kernel(first, common, f"{frag.label}: the reduction's identity where any element lands",
                               where + [f"tl.store(out_ptr + dest, tl.full([BLOCK], {_identity(mode, dtype)}, "
                                        f"{tl_dtype}), mask=ok)"]))
        lines += _launch(first, common_args, "_n", wide)
    name = names.kernel(frag.label)
    params, args = list(common), list(common_args)
    if mode == "store":
        action = ["tl.store(out_ptr + dest, val, mask=ok)"]
    else:
        action = [f"{_ATOMIC[mode]}(out_ptr + dest, val, mask=ok, sem=\"relaxed\")"]
    if mode == "mean":
        params.insert(0, "count_ptr")
        args.insert(0, "_count")
        action.append(f"tl.atomic_add(count_ptr + dest, tl.full([BLOCK], 1.0, {tl_dtype}), mask=ok, sem=\"relaxed\")")
        lines.append(f"_count = torch.full_like({out}, {1.0 if include_self else 0.0})")
    kernels.append(_kernel(name, params, f"{frag.label}: each source element to its place ({mode})", body + action))
    lines += _launch(name, args, "_n", wide)

    # -- mean's division and the epilogue: a last pass over the output ----------------------------
    if mode == "mean" or frag.epilogue:
        out_sizes = [f"osize{d}" for d in range(1, rank)]
        ospace = IndexSpace(rank, "offs", "mask", out_sizes)
        reserved = {"out_ptr", "count_ptr", "n", "WIDE", "BLOCK"} | set(out_sizes)
        block = PointwiseBlock(program, frag.epilogue, shape, known={anchor_out}, reserved=reserved)
        finish = ["val = tl.load(out_ptr + offs, mask=mask, other=0)"]
        if mode == "mean":
            finish.append("val = val / tl.maximum(tl.load(count_ptr + offs, mask=mask, other=1), 1)")
        epilogue = block.emit(ospace, {anchor_out: "val"})[len(ospace.lines):] if frag.epilogue else []
        values = {anchor_out: "val", **{o: program.expr(o) for n in frag.epilogue for o in n.outputs}}
        targets = [o for o in stores if o != anchor_out or mode == "mean"]
        outs = [program.expr(o) if o != anchor_out else out for o in targets]
        last = names.kernel(f"{frag.label} finish")
        fparams = ["out_ptr"] + (["count_ptr"] if mode == "mean" else []) + block.params() + \
            [f"{o}_st" for o in outs] + ["n"] + out_sizes
        kernels.append(_kernel(last, fparams, f"{frag.label}: " + ("the mean, " if mode == "mean" else "")
                               + "the epilogue", ospace.lines + finish + epilogue
                               + [f"tl.store({o}_st + offs, {values[v]}, mask=mask)" for o, v in zip(outs, targets)]))
        lines.append(f"_shape = {out}.shape")
        lines += [f"{program.expr(o)} = {empty('_shape', len(program.values[o].shape), f'{out}.device', program.values[o].dtype)}"
                  for o in targets if o != anchor_out]
        prelude, epilogue_args = block.launch_args("_shape")
        lines += prelude
        fargs = [out] + (["_count"] if mode == "mean" else []) + epilogue_args + outs + [f"{out}.numel()"] + \
            (["*_shape[1:]"] if rank > 1 else [])
        lines += _launch(last, fargs, f"{out}.numel()", f"{out}.numel() > {WIDE}")
    return Emitted(kernels, lines)
