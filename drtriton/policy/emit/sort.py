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
keyed by the values where a row's all fit in int32 (a mixture of experts' routing sorts a few
thousand expert ids: checked in the kernel), each replaced by its rank in the row otherwise (how
many elements are below it, counted against the row reloaded a chunk at a time: R^2
comparisons, 1.9 ms for 4096 elements on an H200); float64 is Unsupported.

Rows longer than one program sorts (MAX_ROW, 512 under the interpreter) go in chunks for sort,
topk, kthvalue, median and nanmedian (`_emit_long`); mode is Unsupported there.

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
from . import Emitted, Names, Unsupported, empty, pow2

OPS = {"sort", "topk", "kthvalue", "median", "nanmedian", "mode"}
#: one element per row, at a sorted position: along long rows too (`_emit_long`), mode not
_SELECTIONS = ("kthvalue", "median", "nanmedian")
#: a long selection's chunks at most (its cost grows as the square of the chunks)
MAX_SELECTION_CHUNKS = 64
#: the longest row one program sorts (registers: an int64 key per element); longer rows of sort
#: and topk go in chunks of this many (`_emit_long`)
MAX_ROW = 4096
#: the same under the Triton interpreter, which sorts a long vector slowly (tests stay short)
INTERPRETED_ROW = 512
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


def _keys(dtype: str, descending: bool, part: bool = False) -> list[str]:
    """Kernel lines from the loaded row `xv` (masked by `mask`, positions `r`) to the int64 keys
    `key` (value order, then index; padding last). `part`: `xv` is one chunk of a longer row (keys
    of all chunks must compare, so what decides them is read from the whole row)."""
    if dtype == "torch.int64":
        # 64-bit values do not fit beside an index: each is replaced by its rank, the number of
        # elements of the row below it (equal values, equal ranks), counted CHUNK at a time; a row
        # whose values all fit in int32 (expert ids, class labels) is keyed by the values themselves
        lines = ["lo = tl.min(tl.where(mask, xv, 0))",
                 "hi = tl.max(tl.where(mask, xv, 0))"]
        if part:
            lines += ["for j0 in range(0, R, BLOCK):  # the whole row's extremes",
                      "    j = j0 + tl.arange(0, BLOCK)",
                      "    xj = tl.load(x_ptr + o * R * I + j.to(tl.int64) * I + i, mask=j < R, other=0)",
                      "    lo = tl.minimum(lo, tl.min(xj))",
                      "    hi = tl.maximum(hi, tl.max(xj))"]
        lines += ["if (lo >= -2147483648) & (hi <= 2147483647):",
                 "    v = xv.to(tl.int32)",
                 "else:",
                 "    v = tl.zeros((BLOCK,), tl.int32)",
                 "    for j0 in range(0, R, CHUNK):",
                 "        j = j0 + tl.arange(0, CHUNK)",
                 "        xj = tl.load(x_ptr + o * R * I + j.to(tl.int64) * I + i, mask=j < R)",
                 "        below = (xj[None, :] < xv[:, None]) & (j < R)[None, :]",
                 "        v += tl.sum(below.to(tl.int32), axis=1)"]
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
    longest = MAX_ROW if device == "cuda" else INTERPRETED_ROW
    if R > longest and op not in ("sort", "topk") + _SELECTIONS:
        raise Unsupported(f"{op} along {R} elements: one program sorts at most {longest}")
    if op in _SELECTIONS and R > longest * MAX_SELECTION_CHUNKS:
        # every element searches every chunk, to keep one: past this, a selection would want its own
        # algorithm (a radix select), not a whole sort
        raise Unsupported(f"{op} along {R} elements: at most {longest * MAX_SELECTION_CHUNKS} (chunks of {longest})")
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

    if R > longest:
        return _emit_long(program, frag, names, flat, axis, store_v, store_i, device)
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

    lines, args = _launch_outputs(program, frag, flat, axis, store_v, store_i, "a row sort per program")
    args += ["_R", "_I"] + ([str(attrs["k"])] if op in ("topk", "kthvalue") else [])
    warps = 4 if R <= 1024 else 8
    # a rank count compares a [BLOCK, CHUNK] tile: at most 16384 pairs at a time
    chunk = ", CHUNK=max(16384 // max(_next_pow2(_R), 2), 1)" if ranked else ""
    lines += ["if _O * _R * _I:",
              f"    {name}[(_O * _I,)]({', '.join(args)}, BLOCK=max(_next_pow2(_R), 2){chunk}, num_warps={warps})"]
    return Emitted(([_RUNS] if op == "mode" else []) + [kernel], lines)


def _launch_outputs(program: Program, frag: Fragment, flat: bool, axis: int, store_v: bool, store_i: bool,
                    how: str) -> tuple[list[str], list[str]]:
    """Forward lines viewing the input as (_O, _R, _I) and allocating the stored outputs; the
    kernel arguments so far (the input, then the outputs)."""
    node, op, attrs = frag.anchor, frag.anchor.op, frag.anchor.attrs
    values_out, index_out = node.outputs[0], (node.outputs[1] if len(node.outputs) > 1 else None)
    xe = program.expr(program.inputs_of(node)[0])
    lines = [f"# {frag.label}: Triton, {how}"]
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
    if op == "kthvalue":  # PyTorch's error, where nothing would be stored
        lines += [f"if not 1 <= {attrs['k']} <= _R:",
                  f"    raise IndexError(f\"kthvalue(): selected number k out of range for dimension {axis}\")"]
    elif op in _SELECTIONS and not flat:
        lines += ["if _R == 0 and _O * _I:",
                  f"    raise IndexError(\"{op}(): Expected reduction dim {axis} to have non-zero size.\")"]
    args = ["_x"]
    if store_v:
        v = program.expr(values_out)
        lines.append(f"{v} = {empty(shape, len(program.values[values_out].shape), '_x.device', '_x.dtype')}")
        if op in _SELECTIONS and flat:  # the median of no elements: NaN, as PyTorch's (no launch then)
            lines += ["if _R == 0:", f"    {v}.fill_(float(\"nan\"))"]
        args.append(v)
    if store_i:
        ix = program.expr(index_out)
        lines.append(f"{ix} = {empty(shape, len(program.values[index_out].shape), '_x.device', 'torch.int64')}")
        args.append(ix)
    return lines, args


def _count_below(needle: str, count: str, width: str, span: str, chunk: str, prefix: str = "") -> list[str]:
    """Place-kernel lines: `count` ([width] int64) = how many keys below `needle` ([width]) the
    row's sorted chunks hold, summed over every chunk (`chunk` the loop's name), each by a
    binary search over its first `span` keys in STEPS halvings; `prefix` names its variables."""
    lo, hi, active, mid, probe, below = (prefix + v for v in ("lo", "hi", "active", "mid", "probe", "below"))
    return [f"{count} = tl.zeros(({width},), tl.int64)",
            f"for {chunk} in range(0, tl.num_programs(1)):",
            f"    {lo} = tl.zeros(({width},), tl.int32)",
            f"    {hi} = tl.full(({width},), {span}, tl.int32)",
            "    for _ in tl.static_range(STEPS):",
            f"        {active} = {lo} < {hi}",
            f"        {mid} = ({lo} + {hi}) // 2",
            f"        {probe} = tl.load(ws_row + {chunk} * BLOCK + {mid}, mask={active}, other={_INT64_MAX})",
            f"        {below} = {probe} < {needle}",
            f"        {lo} = tl.where({active} & {below}, {mid} + 1, {lo})",
            f"        {hi} = tl.where({active} & ~{below}, {mid}, {hi})",
            f"    {count} += {lo}"]


#: the smallest key of a NaN (`_keys`: every NaN's bits 0x7FC00000, then its index)
_NAN_KEY = "0x7FC0000000000000"


def _wanted_position(op: str, dtype: str) -> list[str]:
    """Place-kernel lines setting `t`, the sorted position a selection keeps: k - 1 (kthvalue),
    the lower median; for floats the median of a row with a NaN is its first NaN, after the
    numbers, and nanmedian the lower median of the numbers, so the row's NaNs are counted: the
    keys below the first NaN key in every sorted chunk, a binary search each."""
    if op == "kthvalue":
        return ["t = K - 1"]
    if dtype not in _FLOATS:
        return ["t = (R - 1) // 2"]
    # (names of their own, n...: a name the places' search assigned would be carried into this loop)
    lines = _count_below(_NAN_KEY, "numbers", "1", "BLOCK", "e", "n")
    lines.append("nans = R - tl.sum(numbers, axis=0)")
    if op == "median":
        return lines + ["t = tl.where(nans > 0, R - nans, (R - 1) // 2)"]
    return lines + ["t = tl.where(nans < R, (R - nans - 1) // 2, 0)"]


def _emit_long(program: Program, frag: Fragment, names: Names, flat: bool, axis: int, store_v: bool,
               store_i: bool, device: str) -> Emitted:
    """sort, topk and the selections (kthvalue, median) along rows longer than one program sorts
    (a vocabulary's logits, a mixture of experts' ids for thousands of tokens, the median of a
    whole tensor), in chunks of MAX_ROW elements and two kernels. The first
    sorts each chunk's keys (`_keys`: distinct, so an element's place in the sorted row is the
    number of keys below its own) into a workspace; the second counts, for each key of a chunk, the
    keys below it in every chunk (a binary search in each sorted chunk, its own included) and
    stores the element at that place (sort), or there if it is among the first k (topk: only a
    chunk's first k keys can be, so only those are placed and searched, SPAN of them), or the one
    element whose place is the wanted position (`_wanted_position`). Off the GPU the chunks are
    `INTERPRETED_ROW` long."""
    node, op, attrs = frag.anchor, frag.anchor.op, frag.anchor.attrs
    x = program.inputs_of(node)[0]
    dtype = program.values[x].dtype
    descending = attrs["descending"] if op == "sort" else attrs["largest"] if op == "topk" else False
    name = names.kernel(frag.label)
    ranked = dtype == "torch.int64"
    block = MAX_ROW if device == "cuda" else INTERPRETED_ROW
    row = ["pid = tl.program_id(0).to(tl.int64)",
           "c = tl.program_id(1)",
           "o = pid // I",
           "i = pid % I",
           "ws_row = ws_ptr + pid * tl.num_programs(1) * BLOCK"]
    sort_chunk = "\n".join([
        "@triton.jit",
        f"def {name}_chunks(x_ptr, ws_ptr, R, I, BLOCK: tl.constexpr{', CHUNK: tl.constexpr' if ranked else ''}):",
        f"    # {op} of long rows, step 1: a program per (row, chunk of BLOCK elements) sorts the chunk's keys",
        *(f"    {line}" for line in row),
        "    r = c * BLOCK + tl.arange(0, BLOCK)  # positions in the row",
        "    mask = r < R",
        "    xv = tl.load(x_ptr + o * R * I + r.to(tl.int64) * I + i, mask=mask)",
        *(f"    {line}" for line in _keys(dtype, descending, part=True)),
        "    tl.store(ws_row + c * BLOCK + tl.arange(0, BLOCK), key)",
    ])
    length = "R" if op == "sort" else "K"
    outs = (["v_out"] if store_v else []) + (["i_out"] if store_i else [])
    if op in _SELECTIONS:  # the element whose place is the wanted position, stored as the row's one
        stores = [*_wanted_position(op, dtype), f"keep = (key != {_INT64_MAX}) & (at == t)",
                  "out = pid + 0 * at  # o * I + i, in every lane: only the one kept stores"]
    else:
        stores = [f"keep = (key != {_INT64_MAX}) & (at < {length})  # padding is stored nowhere",
                  f"out = o * {length} * I + at * I + i"]
    place = "\n".join([
        "@triton.jit",
        f"def {name}_place(x_ptr, ws_ptr, {''.join(o + ', ' for o in outs)}R, I, K, BLOCK: tl.constexpr, "
        "SPAN: tl.constexpr, STEPS: tl.constexpr):",
        f"    # {op} of long rows, step 2: a key's place in the row is the count of keys below it in every",
        "    # sorted chunk, found by binary search (in its own chunk, that is its position there)",
        *(f"    {line}" for line in row),
        "    key = tl.load(ws_row + c * BLOCK + tl.arange(0, SPAN))",
        "    # (a count of SPAN or more is past the first K anyway)",
        *(f"    {line}" for line in _count_below("key", "at", "SPAN", "SPAN", "d")),
        *(f"    {line}" for line in stores),
        "    idx = key - ((key >> 32) << 32)  # the low 32 bits: the element's index in the row",
        *(["    val = tl.load(x_ptr + o * R * I + idx * I + i, mask=keep)", "    tl.store(v_out + out, val, mask=keep)"]
          if store_v else []),
        *(["    tl.store(i_out + out, idx, mask=keep)"] if store_i else []),
    ])
    lines, args = _launch_outputs(program, frag, flat, axis, store_v, store_i,
                                  f"rows in chunks of {block}: each chunk sorted, then each element placed")
    k = str(attrs["k"]) if op in ("topk", "kthvalue") else "_R"
    chunk = f", CHUNK={max(16384 // block, 1)}" if ranked else ""  # a rank count's tile: 16384 pairs
    span = min(block, pow2(attrs["k"])) if op == "topk" else block
    steps = span.bit_length()  # a binary search over SPAN sorted keys: log2(SPAN) + 1 halvings
    lines += ["if _O * _R * _I:",
              f"    _C = _cdiv(_R, {block})",
              f"    _ws = torch.empty(_O * _I, _C * {block}, device=_x.device, dtype=torch.int64)",
              f"    {name}_chunks[(_O * _I, _C)](_x, _ws, _R, _I, BLOCK={block}{chunk}, num_warps=8)",
              f"    {name}_place[(_O * _I, _C)](_x, _ws, {''.join(a + ', ' for a in args[1:])}_R, _I, {k}, "
              f"BLOCK={block}, SPAN={span}, STEPS={steps}, num_warps={8 if span >= 1024 else 4})"]
    return Emitted([sort_chunk, place], lines)
