"""Matrix products (`matmul`, `bmm`, `linear`) with `tl.dot` and a fused epilogue.

One program computes a BM x BN tile of the output for one batch entry, looping over K in BK
steps; tiles are ordered in groups of GROUP_M rows so neighbours share panels of A and B in L2.
fp32 stays fp32: `tl.dot` runs with input_precision "ieee", or "tf32x3" (three TF32 products
that recover fp32 accuracy on the tensor cores) as a faster variant. The epilogue (bias,
activations, residual adds...) runs on the accumulator tile before the single store.

Shapes the square tiles serve badly:
- a narrow side (a matrix-vector product, a batch of one or a few rows): tiles 16 wide on it,
  chosen from the captured shape (the module stays correct at any shape);
- few output tiles over a long K (a GEMV, a 256 x 256 output over K = 500k): split-K. Decided
  on the host per call (`_split_k`): when the output tiles cannot fill the SMs, each program
  also takes one of S chunks of K and stores its partial tile in a workspace; a second kernel
  adds the S partials in a fixed order (deterministic, no atomics), then runs the bias and the
  epilogue;
- rows whose stride is not a multiple of 16 elements (K = 2949): Triton cannot prove the rows
  16-byte aligned and loads them 4 bytes at a time, so a large product first copies such an
  operand into rows padded to 16 elements (`_aligned_rows`: a read and a write of the operand,
  done only when the other side is at least 256 long, so the product reads it that many times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, autotune, empty, stored_values

# Launch configurations the autotuner chooses from on the GPU (the first is used on the CPU).
TILES = [
    {"BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 3},
    {"BM": 128, "BN": 128, "BK": 32, "num_warps": 8, "num_stages": 3},
    {"BM": 128, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 4},
    {"BM": 64, "BN": 128, "BK": 32, "num_warps": 4, "num_stages": 4},
    {"BM": 32, "BN": 64, "BK": 64, "num_warps": 4, "num_stages": 3},
]


# A side of 16 or fewer (a vector, a few rows): tiles 16 wide on it, long in K
NARROW_N = [
    {"BM": 128, "BN": 16, "BK": 64, "num_warps": 4, "num_stages": 4},
    {"BM": 64, "BN": 16, "BK": 128, "num_warps": 4, "num_stages": 3},
    {"BM": 256, "BN": 16, "BK": 64, "num_warps": 8, "num_stages": 3},
]
NARROW_M = [{**t, "BM": t["BN"], "BN": t["BM"]} for t in NARROW_N]
NARROW = 16

#: the SM count `emit` assumes for the captured shape (H100 and H200: 132)
NOMINAL_SMS = 132
#: rows padded to 16 elements when the product has at least this many multiply-adds, for an
#: operand the other side reads this many times over (else the copy costs more than it saves)
ALIGN_MIN_WORK = 2 ** 32
ALIGN_MIN_REUSE = 256


# The FMA variants: one output column (fma "n": BM rows times the vector) or one row (fma "m")
FMA_N = [
    {"BM": 64, "BN": 1, "BK": 128, "num_warps": 4, "num_stages": 3},
    {"BM": 16, "BN": 1, "BK": 128, "num_warps": 4, "num_stages": 3},
    {"BM": 128, "BN": 1, "BK": 64, "num_warps": 8, "num_stages": 3},
]
FMA_M = [{**t, "BM": 1, "BN": t["BM"]} for t in FMA_N]


def tiles(m, n, fma: str | None = None) -> list[dict]:
    """The tile configurations for a product with m rows and n columns (captured sizes)."""
    if fma:
        return FMA_N if fma == "n" else FMA_M
    if isinstance(n, int) and n <= NARROW:
        return NARROW_N
    if isinstance(m, int) and m <= NARROW:
        return NARROW_M
    return TILES


def configs(program: Program, frag: Fragment) -> list[dict]:
    """Variants: the dot precision; for a product with one output column (a matrix-vector
    product) or one row (a batch of one through a linear layer), also plain FMAs over the
    operand that is read once (bandwidth, not tensor cores, bounds it). The autotuner picks the
    tile on the GPU."""
    variants = [{"precision": "ieee"}, {"precision": "tf32x3"}]
    p = _product(program, frag)
    if p.n == 1:
        variants.append({"precision": "ieee", "fma": "n"})
    elif p.m == 1:
        variants.append({"precision": "ieee", "fma": "m"})
    return variants


def _operands(program: Program, frag: Fragment):
    """(a, b, bias, b_transposed) of the anchor, normalised to a batched
    product out[z] = a[z] @ b[z] (+ bias), with broadcast batch dims folded by strides."""
    node = frag.anchor
    ins = program.inputs_of(node)
    if node.op == "linear":
        a, w = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        return a, w, bias, True
    if node.op in ("matmul", "bmm"):  # einsum's "...mk,...nk->...mn" reads b transposed
        return ins[0], ins[1], None, bool(node.attrs.get("transpose_b"))
    raise Unsupported(node.op)


def _broadcastable(x, y) -> bool:
    """Batch dims that broadcast, right-aligned: equal, or 1 on one side (a symbolic size only
    matches itself)."""
    return all(p == q or p == 1 or q == 1 for p, q in zip(reversed(list(x)), reversed(list(y))))


def split_k(m: int, n: int, k: int, z: int, sms: int) -> tuple[int, int]:
    """(S, KC): K in S chunks of KC (a multiple of 128, every tile's BK) when the product's 64 x 64
    output tiles cannot fill the `sms` SMs and K is long; (1, k) otherwise. The generated module
    runs it on the host as `_split_k` at every call; `emit` asks it about the captured shape."""
    count = ((m + 63) // 64) * ((n + 63) // 64) * z
    if count == 0 or count >= sms or k < 4096:  # (self-contained: the generated module has no constants of ours)
        return 1, k
    s = min(-(-2 * sms // count), k // 2048)  # about two programs an SM, chunks of 2048 or more
    chunk = -(-k // s)
    kc = -(-chunk // 128) * 128
    return -(-k // kc), kc


def aligned_rows(t):
    """`t` (2-D), or a copy whose rows start 16 elements apart (its other dim padded) when its
    stride is not a multiple of 16: Triton then knows the rows 16-byte aligned and loads them
    in vectors. Runs in the generated module as `_aligned_rows`."""
    import torch
    if t.dim() != 2 or min(t.shape) < 2 or 1 not in t.stride():
        return t
    inner = 1 if t.stride(1) == 1 else 0  # the contiguous dim
    if t.stride(1 - inner) % 16 == 0:
        return t
    rows, cols = t.shape if inner == 1 else t.shape[::-1]
    padded = torch.empty((rows, -(-cols // 16) * 16), device=t.device, dtype=t.dtype)[:, :cols]
    padded = padded if inner == 1 else padded.t()
    padded.copy_(t)
    return padded


def k_loop(fma: str | None, prec: str, lo: str, hi: str) -> list[str]:
    """The loop over K that leaves the (BM, BN) tile in `acc`: tl.dot, or for a side of one, the
    products summed in a (BM, BK) or (BK, BN) accumulator and reduced once after the loop."""
    a_tile = f"a = tl.load(a_rows + k[None, :] * stride_ak, mask=(rm[:, None] < M) & (k[None, :] < {hi}), other=0.0)"
    b_tile = f"b = tl.load(b_cols + k[:, None] * stride_bk, mask=(k[:, None] < {hi}) & (rn[None, :] < N), other=0.0)"
    if fma == "n":  # BN == 1: b's column as a (1, BK) row against a's (BM, BK) rows
        return ["acc_k = tl.zeros((BM, BK), dtype=tl.float32)",
                f"for k0 in range({lo}, {hi}, BK):", "    k = k0 + rk", f"    {a_tile}",
                f"    b = tl.load(b_cols + k[None, :] * stride_bk, mask=(k[None, :] < {hi}) & (rn[:, None] < N), "
                "other=0.0)",
                "    acc_k += a * b", "acc = tl.sum(acc_k, axis=1)[:, None]"]
    if fma == "m":  # BM == 1: a's row as a (BK, 1) column against b's (BK, BN) columns
        return ["acc_k = tl.zeros((BK, BN), dtype=tl.float32)",
                f"for k0 in range({lo}, {hi}, BK):", "    k = k0 + rk",
                f"    a = tl.load(a_rows + k[:, None] * stride_ak, mask=(rm[None, :] < M) & (k[:, None] < {hi}), "
                "other=0.0)",
                f"    {b_tile}", "    acc_k += a * b", "acc = tl.sum(acc_k, axis=0)[None, :]"]
    return ["acc = tl.zeros((BM, BN), dtype=tl.float32)",
            f"for k0 in range({lo}, {hi}, BK):", "    k = k0 + rk", f"    {a_tile}", f"    {b_tile}",
            f'    acc += tl.dot(a, b, input_precision="{prec}")']


def _numbers(*sizes) -> bool:
    return all(isinstance(x, int) for x in sizes)


@dataclass
class _Product:
    """A product's operands and the sizes captured for it (None where symbolic)."""
    a: str
    b: str
    bias: str | None
    b_t: bool  # b held as (..., N, K), read transposed
    vec_a: bool  # a vector operand: a one-row (a) or one-column (b) matrix, its axis dropped
    vec_b: bool
    batched: bool  # (.., M, K) @ (.., K, N) with up to two batch dims that broadcast
    m: int | None
    n: int | None
    k: int | None
    z: int | None


def _product(program: Program, frag: Fragment) -> _Product:
    """The anchor as out[z] = a[z] @ b[z] (+ bias); Unsupported for what the template lacks."""
    node = frag.anchor
    a, b, bias, b_t = _operands(program, frag)
    sa, sb = program.values[a].shape, list(program.values[b].shape)
    if b_t and len(sb) >= 2:  # as the (..., K, N) operand it is read as (nn.Linear's W is (N, K))
        sb = sb[:-2] + [sb[-1], sb[-2]]
    so = program.values[node.outputs[0]].shape
    # batched: (.., M, K) @ (.., K, N) with up to two batch dims that broadcast (attention's
    # heads, one key head shared by all query heads), or (..., M, K) @ (K, N)
    vec_a, vec_b = len(sa) == 1, len(sb) == 1
    batched = len(sb) >= 3 and not vec_a
    if (vec_a and len(sb) > 3) or (vec_b and node.op == "linear"):
        raise Unsupported(f"matmul of ranks {len(sa)} and {len(sb)}")
    if len(sa) < 1 or len(sb) < 1 or len(sb) > 4 or (node.op == "linear" and len(sb) != 2):
        raise Unsupported(f"matmul of ranks {len(sa)} and {len(sb)}")
    if batched and (len(sa) > 4 or not _broadcastable(sa[:-2], sb[:-2])):
        raise Unsupported("batch dims that do not broadcast")
    if any(program.values[v].dtype != "torch.float32" for v in (a, b)):
        raise Unsupported("non-fp32 matmul")
    m = 1 if vec_a else (sa[-2] if batched else math.prod(sa[:-1]) if _numbers(*sa[:-1]) else None)
    z = math.prod(so[:-2]) if batched and _numbers(*so[:-2]) else 1 if not batched else None
    return _Product(a, b, bias, b_t, vec_a, vec_b, batched, m, 1 if vec_b else sb[-1], sa[-1], z)


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    p = _product(program, frag)
    a, b, bias, b_t, vec_a, vec_b, batched = p.a, p.b, p.bias, p.b_t, p.vec_a, p.vec_b, p.batched
    out = node.outputs[0]
    so = program.values[out].shape
    # the captured sizes choose the tiles and whether the split-K path is emitted at all
    known = _numbers(p.m, p.n, p.k, p.z)
    can_split = known and split_k(p.m, p.n, p.k, p.z, NOMINAL_SMS)[0] > 1
    align = (known and not batched and not vec_a and not vec_b and p.m * p.n * p.k >= ALIGN_MIN_WORK
             and any(x % 16 for x in (p.m, p.n, p.k)))  # a stride may be off 16 (sizes are)
    fma = config.get("fma")  # "n": one output column, "m": one row; FMAs, no tl.dot
    # the epilogue runs on the (..., M, N) output; rows of a fold their leading dims into M
    epi = PointwiseBlock(program, frag.epilogue, so, known={out},
                         reserved={"a_ptr", "b_ptr", "bias_ptr", "ws_ptr"})
    stores = stored_values(program, frag, so)
    name = names.kernel(frag.label)
    prec = config["precision"]
    outs = [program.expr(o) for o in stores]
    rank = len(so)
    sizes = [f"size{d}" for d in range(1, rank)]

    def finish_lines() -> list[str]:
        """bias, epilogue and stores on `acc` (a tile at rm, rn of batch z), one indent deep"""
        space = IndexSpace(rank, "c_offs", "c_mask", sizes)  # the tile -> flat offsets in the output
        env = {out: "acc"}
        epi_lines = epi.emit(space, env)
        return [
            *(["acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]"] if bias else []),
            *epi_lines,
            *(f"tl.store({o}_out + c_offs, {env[v]}, mask=c_mask)" for o, v in zip(outs, stores)),
        ]

    outputs = (["bias_ptr"] if bias else []) + epi.params() + [f"{o}_out" for o in outs]
    params = (["a_ptr", "b_ptr"] + outputs + ["M", "N", "K", "Z1", "stride_az0", "stride_az1", "stride_am",
              "stride_ak", "stride_bz0", "stride_bz1", "stride_bk", "stride_bn"] + sizes
              + (["KC", "ws_ptr"] if can_split else []))
    key = ["M", "N", "K"] + (["KC"] if can_split else [])
    decorator = autotune([{**t, "GROUP_M": 8} for t in tiles(p.m, p.n, fma)], key, device)
    k_range = ("k_lo = tl.program_id(2) * KC", "k_hi = tl.minimum(K, k_lo + KC)") if can_split else ()
    lo, hi = ("k_lo", "k_hi") if can_split else ("0", "K")
    tile = ["    c_mask = (rm[:, None] < M) & (rn[None, :] < N)",
            "    c_offs = z * M * N + rm[:, None].to(tl.int64) * N + rn[None, :]"]
    if can_split:  # a chunk's partial tile goes to the workspace; the finishing kernel does the rest
        ending = tile + ["    if SPLIT:",
                         "        tl.store(ws_ptr + tl.program_id(2).to(tl.int64) * tl.num_programs(1) * M * N + c_offs, "
                         "acc, mask=c_mask)",
                         "    else:", *(f"        {line}" for line in finish_lines())]
    else:
        ending = tile + [f"    {line}" for line in finish_lines()]
    kernel = decorator + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, "
        f"GROUP_M: tl.constexpr{', SPLIT: tl.constexpr' if can_split else ''}):",
        f"    # {frag.label}: out[z] = a[z] @ b[z]{' + bias' if bias else ''}, then the epilogue, one store"
        + (" (or, split over K, this chunk's partial)" if can_split else ""),
        "    pid = tl.program_id(0)",
        "    z = tl.program_id(1).to(tl.int64)",
        "    z0 = z // Z1",  # the batch as two dims (heads of a batch); one of them 1 when there is one
        "    z1 = z % Z1",
        "    num_m = tl.cdiv(M, BM)",
        "    num_n = tl.cdiv(N, BN)",
        "    group = GROUP_M * num_n",
        "    first_m = (pid // group) * GROUP_M",
        "    size_m = min(num_m - first_m, GROUP_M)",
        "    pid_m = first_m + (pid % group) % size_m",
        "    pid_n = (pid % group) // size_m",
        "    rm = pid_m * BM + tl.arange(0, BM)",
        "    rn = pid_n * BN + tl.arange(0, BN)",
        "    rk = tl.arange(0, BK)",
        "    a_rows = a_ptr + z0 * stride_az0 + z1 * stride_az1 + rm[:, None] * stride_am",
        "    b_cols = b_ptr + z0 * stride_bz0 + z1 * stride_bz1 + rn[None, :] * stride_bn",
        *(f"    {line}" for line in k_range),
        *(f"    {line}" for line in k_loop(fma, prec, lo, hi)),
        *ending,
    ]
    kernels = ["\n".join(kernel)]
    if can_split:
        kernels.append("\n".join([
            "@triton.jit",
            f"def {name}_finish(ws_ptr, {', '.join(outputs)}, M, N, S, {''.join(d + ', ' for d in sizes)}"
            "BM: tl.constexpr, BN: tl.constexpr):",
            f"    # {frag.label}, split over K: the S partial tiles added in order, then"
            f"{' the bias,' if bias else ''} the epilogue and the store",
            "    rm = tl.program_id(0) * BM + tl.arange(0, BM)",
            "    rn = tl.program_id(1) * BN + tl.arange(0, BN)",
            "    z = tl.program_id(2).to(tl.int64)",
            *tile,
            "    chunk = tl.num_programs(2).to(tl.int64) * M * N",
            "    acc = tl.zeros((BM, BN), dtype=tl.float32)",
            "    for s in range(0, S):",
            "        acc += tl.load(ws_ptr + s * chunk + c_offs, mask=c_mask, other=0.0)",
            *(f"    {line}" for line in finish_lines()),
        ]))

    ea, eb = program.expr(a), program.expr(b)
    how = "products summed with FMAs" if fma else f"tl.dot ({prec})"
    lines = [f"# {frag.label}: Triton, {how}{' with a fused epilogue' if frag.epilogue else ''}"]
    eb_in = eb  # the b operand as launched
    if batched:  # views (transposed heads) read through their strides; a broadcast batch dim, stride 0
        # b held as (..., N, K) (einsum's "...mk,...nk"): read transposed through its strides
        n_dim, b_strides = ("-2", "_sbn, _sbk") if b_t else ("-1", "_sbk, _sbn")
        # the batch dims: the same in both factors (attention's heads) or broadcast (one key head
        # shared by all query heads); compared first, since torch.broadcast_shapes costs 13 us of
        # host time on CPU, 50-60 us on an H200's
        lines += [f"_a = {ea}", "_M, _K = _a.shape[-2:]", f"_N = {eb}.shape[{n_dim}]",
                  "_batch = _a.shape[:-2]",
                  f"if {eb}.shape[:-2] != _batch:",
                  f"    _batch = torch.broadcast_shapes(_batch, {eb}.shape[:-2])",
                  "_Z0, _Z1 = (1, 1, *_batch)[-2:]", "_Z = _Z0 * _Z1",
                  "_saz0, _saz1 = _batch_strides(_a, 2)", f"_sbz0, _sbz1 = _batch_strides({eb}, 2)",
                  "_sam, _sak = _a.stride()[-2:]", f"{b_strides} = {eb}.stride()[-2:]"]
    elif vec_a and len(program.values[b].shape) >= 3:  # (K,) @ (Z, K, N): the one row is read for every z
        lines += [f"_a = {ea}", "_Z = _Z1 = " + f"{eb}.shape[0]", "_M, _K = 1, _a.shape[0]", f"_N = {eb}.shape[-1]",
                  "_saz1, _sam, _sak = 0, 0, _a.stride(0)", f"_sbz1, _sbk, _sbn = {eb}.stride()", "_saz0 = _sbz0 = 0"]
    else:  # (..., M, K) @ (K, N): the leading dims of a fold into M
        lines += [f"_a = {ea}.reshape(-1, {ea}.shape[-1])", "_M, _K = _a.shape", "_Z = _Z1 = 1",
                  "_saz0 = _saz1 = _sbz0 = _sbz1 = 0"]
        if vec_b:  # (..., M, K) @ (K,): one column
            lines += ["_N = 1", f"_sbk, _sbn = {eb}.stride(0), 0"]
        else:
            lines.append(f"_N = {eb}.shape[0]" if b_t else f"_N = {eb}.shape[-1]")
            if align:  # a large product: rows not 16 elements apart are copied into aligned ones,
                # for an operand read many times over (a's rows once per column tile, b's per row tile)
                eb_in = "_b"
                lines += [f"_b = {eb}", f"if _M * _N * _K >= {ALIGN_MIN_WORK}:",
                          f"    _a = _aligned_rows(_a) if _N >= {ALIGN_MIN_REUSE} else _a",
                          f"    _b = _aligned_rows(_b) if _M >= {ALIGN_MIN_REUSE} else _b"]
            # nn.Linear keeps W as (N, K): read it transposed through its strides
            lines.append(f"_sbn, _sbk = {eb_in}.stride()" if b_t else f"_sbk, _sbn = {eb_in}.stride()")
        lines.append("_sam, _sak = _a.stride()")
    if vec_a and vec_b:  # a dot product: a 0-d result
        shape_src = "()"
    elif vec_b:
        shape_src = f"tuple({ea}.shape[:-1])"
    elif vec_a:
        shape_src = f"(*{eb}.shape[:-2], _N)"
    elif batched:
        shape_src = "(*_batch, _M, _N)"
    else:
        shape_src = f"(*{ea}.shape[:-1], _N)"
    # the kernel reads K elements of both: a shorter b would be read past its end (PyTorch raises)
    k_of_b = f"{eb}.shape[0]" if vec_b else f"{eb}.shape[-1]" if b_t else f"{eb}.shape[-2]"
    lines += [f"if {k_of_b} != _K:",
              f"    raise ValueError(f\"{frag.label}: the factors' inner sizes are {{_K}} and {{{k_of_b}}}, "
              "which must be equal\")"]
    for o, v in zip(outs, stores):
        lines.append(f"{o} = {empty(shape_src, len(program.values[v].shape), f'{ea}.device', 'torch.float32')}")
    prelude, args = epi.launch_args(f"{outs[0]}.shape")
    lines += prelude
    out_args = ([program.expr(bias)] if bias else []) + args + outs
    size_args = [f"*{outs[0]}.shape[1:]"] if rank > 1 else []
    call = ["_a", eb_in] + out_args + ["_M", "_N", "_K", "_Z1", "_saz0", "_saz1", "_sam", "_sak", "_sbz0", "_sbz1",
                                       "_sbk", "_sbn"] + size_args
    tiles_m_n = "_cdiv(_M, meta['BM']) * _cdiv(_N, meta['BN'])"
    if not can_split:
        lines.append(f"_grid = lambda meta: ({tiles_m_n}, _Z)")
        lines.append(f"{name}[_grid]({', '.join(call)})")
        return Emitted(kernels, lines)
    lines += [
        "_S, _KC = _split_k(_M, _N, _K, _Z, _sm_count(_a.device))  # K in _S chunks when the tiles cannot fill the GPU",
        f"_ws = torch.empty(_S, _Z * _M * _N, device=_a.device, dtype=torch.float32) if _S > 1 else {outs[0]}",
        f"_grid = lambda meta: ({tiles_m_n}, _Z, _S)",
        f"{name}[_grid]({', '.join(call + ['_KC', '_ws'])}, SPLIT=_S > 1)",
        "if _S > 1:",
        f"    {name}_finish[(_cdiv(_M, 64), _cdiv(_N, 64), _Z)](_ws, {', '.join(out_args)}, _M, _N, _S, "
        f"{''.join(a + ', ' for a in size_args)}BM=64, BN=64)",
    ]
    return Emitted(kernels, lines)
