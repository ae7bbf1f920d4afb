"""Order statistics: sort (argsort, msort), topk, kthvalue, median, nanmedian, from one row sort.

The input X (contiguous) is viewed as (O, R, I), R the sorted axis, as in `rows`; a program owns
one row (o, i), whose R elements lie I apart (the axis is moved last through strides, not
copied). The row is loaded whole, padded to a power of two, and sorted in registers with
`tl.sort` (a bitonic sort), so R is bounded (`MAX_ROW`; longer rows are Unsupported: PyTorch
keeps them in mixed mode). Then the program stores the whole sorted row (sort), its first k
(topk) or one element (kthvalue at k - 1; median at (n - 1) // 2, the lower median, PyTorch's).

One sort carries both the values and their indices: each element becomes one int64 key, its
value's bits made order-preserving as a signed integer in the high 32 bits (floats: negative
ones with their magnitude bits flipped; every NaN one positive NaN, above +inf, so NaN sorts
last as in PyTorch; -0.0 as +0.0, equal as PyTorch compares them), its index in the low 32.
Keys are distinct, so the sort is stable whatever `tl.sort` does: ties come out by index, as
PyTorch's `stable=True` promises (and its CPU kernel gives on short rows). Descending sorts
negate the value part (-1 - v keeps int32's range) and keep the index ascending: NaN first, ties
by index, as PyTorch. Padding is the largest key. The index is unpacked from the sorted key and
the value read back from X at it (exact, the sign of a zero kept). fp16 and bf16 go through
fp32 (exact); int8/int16/int32/uint8 as int32. int64 values do not fit beside an index: sorted
directly when the indices are not used (values only, order among equal values irrelevant), else
each replaced by its rank in the row (how many elements are below it, counted against the row
reloaded a chunk at a time: R^2 comparisons, as a mixture of experts' routing sorts a few
thousand expert ids); float64 is Unsupported.

mode: the length of the run of equal values ending at each sorted position, by an associative
scan; the first position reaching the longest run is the smallest of the most frequent values
(PyTorch's rule), stored with its last index (where PyTorch's CPU kernel usually points; which
occurrence PyTorch returns is not promised).

median with a NaN in the row is NaN at the first NaN's index (sorted position: the number of
non-NaN values); nanmedian takes the lower median of the non-NaN values (NaN at index 0 when
there is none), as PyTorch.
"""

from __future__ import annotations

from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, empty

OPS = {"sort", "topk", "kthvalue", "median", "nanmedian", "mode"}
#: the longest row one program sorts (registers: an int64 key per element)
MAX_ROW = 4096
_FLOATS = {"torch.float32", "torch.float16", "torch.bfloat16"}
_SMALL_INTS = {"torch.int32", "torch.int16", "torch.int8", "torch.uint8"}
_INT64_MAX = "0x7FFFFFFFFFFFFFFF"


#: mode's scan: (first value, last value, length of the trailing run of equal values, whether all
#: are equal) of a stretch of the sorted row, combined with the stretch after it (associative)
_RUNS = "\n".join([
    "@triton.jit",
    "def _equal_runs(f1, l1, n1, s1, f2, l2, n2, s2):",
    "    joined = l1 == f2",
    "    return f1, l2, tl.where(joined & (s2 != 0), n1 + n2, n2), tl.where(joined, s1 * s2, 0)",
])


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def _used(program: Program, frag: Fragment, value: str) -> bool:
    return value in program.values and program.used_outside(value, {n.name for n in frag.nodes})


def _keys(dtype: str, descending: bool) -> list[str]:
    """Kernel lines from the loaded row `xv` (masked by `mask`, positions `r`) to the int64 keys
    `key` (value order, then index; padding last)."""
    if dtype == "torch.int64":
        # 64-bit values do not fit beside an index: each is replaced by its rank, the number of
        # elements of the row below it (equal values, equal ranks), counted CHUNK at a time
        lines = ["v = tl.zeros((BLOCK,), tl.int32)",
                 "for j0 in range(0, R, CHUNK):",
                 "    j = j0 + tl.arange(0, CHUNK)",
                 "    xj = tl.load(x_ptr + o * R * I + j.to(tl.int64) * I + i, mask=j < R)",
                 "    below = (xj[None, :] < xv[:, None]) & (j < R)[None, :]",
                 "    v += tl.sum(below.to(tl.int32), axis=1)"]
    elif dtype in _FLOATS:
        lines = ["xf = xv.to(tl.float32)",
                 "bits = xf.to(tl.int32, bitcast=True)",
                 "bits = tl.where(xf != xf, 0x7FC00000, bits)  # every NaN one positive NaN: after +inf",
                 "bits = tl.where(xf == 0.0, 0, bits)  # -0.0 as +0.0",
                 "v = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # order-preserving as a signed integer"]
    else:
        lines = ["v = xv.to(tl.int32)"]
    if descending:
        lines.append("v = -1 - v  # descending: the order reversed, indices still ascending")
    return lines + ["key = (v.to(tl.int64) << 32) | r.to(tl.int64)",
                    f"key = tl.where(mask, key, {_INT64_MAX})  # padding sorts last",
                    "key = tl.sort(key)"]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op = node.op
    if op not in OPS:
        raise Unsupported(op)
    if frag.prologue or frag.epilogue or len(frag.nodes) > 1:
        raise Unsupported("a sort with fused operators")
    x = program.inputs_of(node)[0]
    xs = list(program.values[x].shape)
    dtype = program.values[x].dtype
    attrs = node.attrs
    flat = attrs.get("dim", 0) is None or not xs  # median of all elements; a 0-d input (one row of one)
    axis = 0 if flat else attrs["dim"]
    R = 1
    for s in (xs if flat else xs[axis:axis + 1]):
        R *= s
    if R > MAX_ROW:
        raise Unsupported(f"{op} along {R} elements: one program sorts at most {MAX_ROW}")
    values_out, index_out = node.outputs[0], (node.outputs[1] if len(node.outputs) > 1 else None)
    store_v = _used(program, frag, values_out)
    store_i = index_out is not None and _used(program, frag, index_out)
    if not store_v and not store_i:
        raise Unsupported("no output used")
    # int64 values alone: sorted as they are (mode's runs are counted on keys)
    direct = dtype == "torch.int64" and not store_i and op != "mode"
    ranked = dtype == "torch.int64" and not direct  # with their indices: keyed by rank (`_keys`)
    if dtype not in _FLOATS | _SMALL_INTS | {"torch.int64"}:
        raise Unsupported(f"a {dtype} {op}")

    if op == "sort":
        descending, length, what = attrs["descending"], "R", "the sorted row"
    elif op == "topk":
        descending, length, what = attrs["largest"], "K", f"its first k = {attrs['k']}"
    else:
        descending, length, what = False, "1", "one element"

    name = names.kernel(frag.label)
    body = ["pid = tl.program_id(0).to(tl.int64)",
            "o = pid // I",
            "i = pid % I",
            "r = tl.arange(0, BLOCK)",
            "mask = r < R",
            "xv = tl.load(x_ptr + o * R * I + r.to(tl.int64) * I + i, mask=mask)"]
    if direct:
        pad = "0x7FFFFFFFFFFFFFFF" if not descending else "-0x7FFFFFFFFFFFFFFF - 1"
        body += [f"xv = tl.where(mask, xv, {pad})  # padding sorts last",
                 f"val = tl.sort(xv, descending={descending})"]
    else:
        body += _keys(dtype, descending)
    # the position in the sorted row of what is stored
    if op in ("sort", "topk"):
        keep = "r < R" if op == "sort" else "r < K"
    else:
        keep = None
        if op == "kthvalue":
            body.append("at = K - 1")
        elif op == "mode":
            body += ["# the length of the run of equal values ending at each sorted position (equal values",
                     "# are adjacent once sorted): a scan of (first, last, run, all equal) over the row",
                     "vk = key >> 32",
                     "_f, _l, run, _s = tl.associative_scan((vk, vk, tl.where(mask, 1, 0), tl.where(mask, 1, 0)), 0,",
                     "                                      _equal_runs)",
                     "# a run reaches its count at its last element; the first such position of the largest",
                     "# count is the smallest of the most frequent values (PyTorch's), at its last index",
                     "at = tl.min(tl.where(run == tl.max(run, axis=0), r, BLOCK), axis=0)"]
        elif dtype in _FLOATS and op in ("median", "nanmedian"):
            body.append("nans = tl.sum((mask & (xv != xv)).to(tl.int32), axis=0)")
            if op == "median":  # a NaN makes the median NaN: the first NaN, after the R - nans numbers
                body.append("at = tl.where(nans > 0, R - nans, (R - 1) // 2)")
            else:
                body.append("at = tl.where(nans < R, (R - nans - 1) // 2, 0)")
        else:
            body.append("at = (R - 1) // 2")
        sel = "val" if direct else "key"
        body.append(f"{sel} = tl.sum(tl.where(r == at, {sel}, 0), axis=0)  # the element at sorted position `at`")
    if not direct:
        body.append("idx = key - ((key >> 32) << 32)  # the low 32 bits, in int64 arithmetic throughout")
        if store_v:
            body.append("val = tl.load(x_ptr + o * R * I + idx * I + i" + (", mask=" + keep if keep else "") + ")")
    params = ["x_ptr"] + (["v_out"] if store_v else []) + (["i_out"] if store_i else []) + ["R", "I"]
    if op in ("topk", "kthvalue"):
        params.append("K")
    out_len = length  # the stored row's length: R, K or 1
    if keep:
        body.append(f"out = o * {out_len} * I + r.to(tl.int64) * I + i")
    else:
        body.append("out = pid  # o * I + i")
    if store_v:
        body.append("tl.store(v_out + out, val" + (f", mask={keep})" if keep else ")"))
    if store_i:
        body.append("tl.store(i_out + out, idx" + (f", mask={keep})" if keep else ")"))
    kernel = "\n".join([
        "@triton.jit",
        f"def {name}({', '.join(params)}, BLOCK: tl.constexpr{', CHUNK: tl.constexpr' if ranked else ''}):",
        f"    # {op}: X viewed as (O, R, I) = rows of R elements I apart; a program per row (o, i) sorts it",
        f"    # in registers (padded to BLOCK, a power of two) and stores {what}",
        *(f"    {line}" for line in body),
    ])

    # launcher
    xe = program.expr(x)
    lines = [f"# {frag.label}: Triton, a row sort per program"]
    if flat:
        lines += [f"_x = {xe}.contiguous().view(-1)", "_xs = _x.shape", "_O, _R, _I = 1, _xs[0], 1"]
        shape = "()"  # 0-d results (a 0-d input keeps its 0-d shape)
    else:
        lines += [f"_x = {xe}.contiguous()", "_xs = _x.shape",
                  f"_O, _R, _I = math.prod(_xs[:{axis}]), _xs[{axis}], math.prod(_xs[{axis + 1}:])"]
        if op == "sort":
            shape = "_xs"
        elif op == "topk":
            shape = f"(*_xs[:{axis}], {attrs['k']}, *_xs[{axis + 1}:])"
        elif attrs.get("keepdim"):
            shape = f"(*_xs[:{axis}], 1, *_xs[{axis + 1}:])"
        else:
            shape = f"(*_xs[:{axis}], *_xs[{axis + 1}:])"
    args = ["_x"]
    if store_v:
        v = program.expr(values_out)
        lines.append(f"{v} = {empty(shape, len(program.values[values_out].shape), '_x.device', '_x.dtype')}")
        args.append(v)
    if store_i:
        ix = program.expr(index_out)
        lines.append(f"{ix} = {empty(shape, len(program.values[index_out].shape), '_x.device', 'torch.int64')}")
        args.append(ix)
    args += ["_R", "_I"] + ([str(attrs["k"])] if op in ("topk", "kthvalue") else [])
    warps = 4 if R <= 1024 else 8
    # a rank count compares a [BLOCK, CHUNK] tile: at most 16384 pairs at a time
    chunk = ", CHUNK=max(16384 // max(_next_pow2(_R), 2), 1)" if ranked else ""
    lines += ["if _O * _R * _I:",
              f"    {name}[(_O * _I,)]({', '.join(args)}, BLOCK=max(_next_pow2(_R), 2){chunk}, num_warps={warps})"]
    return Emitted(([_RUNS] if op == "mode" else []) + [kernel], lines)
