"""Matrix products (`matmul`, `bmm`, `linear`) with `tl.dot` and a fused epilogue.

One program computes a BM x BN tile of the output for one batch entry, looping over K in BK
steps; tiles are ordered in groups of GROUP_M rows so neighbours share panels of A and B in L2.
fp32 stays fp32: `tl.dot` runs with input_precision "ieee", or "tf32x3" (three TF32 products
that recover fp32 accuracy on the tensor cores) as a faster variant. The epilogue (bias,
activations, residual adds...) runs on the accumulator tile before the single store.
"""

from __future__ import annotations

from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, autotune, stored_values

# Launch configurations the autotuner chooses from on the GPU (the first is used on the CPU).
TILES = [
    {"BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 3},
    {"BM": 128, "BN": 128, "BK": 32, "num_warps": 8, "num_stages": 3},
    {"BM": 128, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 4},
    {"BM": 64, "BN": 128, "BK": 32, "num_warps": 4, "num_stages": 4},
    {"BM": 32, "BN": 64, "BK": 64, "num_warps": 4, "num_stages": 3},
]


def configs(program: Program, frag: Fragment) -> list[dict]:
    """Variants: the dot precision; the autotuner picks the tile on the GPU."""
    return [{"precision": "ieee"}, {"precision": "tf32x3"}]


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


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    a, b, bias, b_t = _operands(program, frag)
    sa, sb = program.values[a].shape, list(program.values[b].shape)
    if b_t and node.op != "linear" and len(sb) >= 2:  # as the (..., K, N) operand it is read as
        sb = sb[:-2] + [sb[-1], sb[-2]]
    out = node.outputs[0]
    so = program.values[out].shape
    # batched: (.., M, K) @ (.., K, N) with up to two batch dims that broadcast (attention's
    # heads, one key head shared by all query heads), or (..., M, K) @ (K, N)
    # a vector operand is a one-row (a) or one-column (b) matrix, its axis dropped from the result
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
    # the epilogue runs on the (..., M, N) output; rows of a fold their leading dims into M
    epi = PointwiseBlock(program, frag.epilogue, so, known={out}, reserved={"a_ptr", "b_ptr", "bias_ptr"})
    stores = stored_values(program, frag, so)
    name = names.kernel(frag.label)
    prec = config["precision"]
    outs = [program.expr(o) for o in stores]
    rank = len(so)
    sizes = [f"size{d}" for d in range(1, rank)]
    # tile coordinates -> flat offset in the contiguous output: batch z, row m, column n
    space = IndexSpace(rank, "c_offs", "c_mask", sizes)
    env = {out: "acc"}
    epi_lines = epi.emit(space, env)
    result_of = {o: env[o] for o in stores}

    params = (["a_ptr", "b_ptr"] + (["bias_ptr"] if bias else []) + epi.params() + [f"{o}_out" for o in outs]
              + ["M", "N", "K", "Z1", "stride_az0", "stride_az1", "stride_am", "stride_ak", "stride_bz0", "stride_bz1",
                 "stride_bk", "stride_bn"] + sizes)
    decorator = autotune([{**t, "GROUP_M": 8} for t in TILES], ["M", "N", "K"], device)
    kernel = decorator + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, "
        "GROUP_M: tl.constexpr):",
        f"    # {frag.label}: out[z] = a[z] @ b[z]{' + bias' if bias else ''}, then the epilogue, one store",
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
        "    acc = tl.zeros((BM, BN), dtype=tl.float32)",
        "    for k0 in range(0, K, BK):",
        "        k = k0 + rk",
        "        a = tl.load(a_rows + k[None, :] * stride_ak, mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)",
        "        b = tl.load(b_cols + k[:, None] * stride_bk, mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)",
        f'        acc += tl.dot(a, b, input_precision="{prec}")',
        *(["    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]"] if bias else []),
        "    c_mask = (rm[:, None] < M) & (rn[None, :] < N)",
        "    c_offs = z * M * N + rm[:, None].to(tl.int64) * N + rn[None, :]",
        *(f"    {line}" for line in epi_lines),
        *(f"    tl.store({o}_out + c_offs, {result_of[v]}, mask=c_mask)" for o, v in zip(outs, stores)),
    ]

    ea, eb = program.expr(a), program.expr(b)
    lines = [f"# {frag.label}: Triton, tl.dot ({prec}){' with a fused epilogue' if frag.epilogue else ''}"]
    if batched:  # views (transposed heads) read through their strides; a broadcast batch dim, stride 0
        # b held as (..., N, K) (einsum's "...mk,...nk"): read transposed through its strides
        n_dim, b_strides = ("-2", "_sbn, _sbk") if b_t else ("-1", "_sbk, _sbn")
        lines += [f"_a = {ea}", "_M, _K = _a.shape[-2:]", f"_N = {eb}.shape[{n_dim}]",
                  f"_batch = torch.broadcast_shapes(_a.shape[:-2], {eb}.shape[:-2])",
                  "_Z0, _Z1 = (1, 1, *_batch)[-2:]", "_Z = _Z0 * _Z1",
                  "_saz0, _saz1 = _batch_strides(_a, 2)", f"_sbz0, _sbz1 = _batch_strides({eb}, 2)",
                  "_sam, _sak = _a.stride()[-2:]", f"{b_strides} = {eb}.stride()[-2:]"]
    elif vec_a and len(sb) >= 3:  # (K,) @ (Z, K, N): the one row is read for every z
        lines += [f"_a = {ea}", "_Z = _Z1 = " + f"{eb}.shape[0]", "_M, _K = 1, _a.shape[0]", f"_N = {eb}.shape[-1]",
                  "_saz1, _sam, _sak = 0, 0, _a.stride(0)", f"_sbz1, _sbk, _sbn = {eb}.stride()", "_saz0 = _sbz0 = 0"]
    else:  # (..., M, K) @ (K, N): the leading dims of a fold into M
        lines += [f"_a = {ea}.reshape(-1, {ea}.shape[-1])", "_M, _K = _a.shape", "_Z = _Z1 = 1",
                  "_saz0 = _saz1 = _sbz0 = _sbz1 = 0", "_sam, _sak = _a.stride()"]
        if vec_b:  # (..., M, K) @ (K,): one column
            lines += ["_N = 1", f"_sbk, _sbn = {eb}.stride(0), 0"]
        elif b_t:  # nn.Linear keeps W as (N, K): read it transposed through its strides
            lines += [f"_N = {eb}.shape[0]", f"_sbn, _sbk = {eb}.stride()"]
        else:
            lines += [f"_N = {eb}.shape[-1]", f"_sbk, _sbn = {eb}.stride()"]
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
    for o in outs:
        lines.append(f"{o} = torch.empty({shape_src}, device={ea}.device, dtype=torch.float32)")
    prelude, args = epi.launch_args(f"{outs[0]}.shape")
    lines += prelude
    call = ["_a", eb] + ([program.expr(bias)] if bias else []) + args + outs + \
           ["_M", "_N", "_K", "_Z1", "_saz0", "_saz1", "_sam", "_sak", "_sbz0", "_sbz1", "_sbk", "_sbn"]
    if rank > 1:
        call.append(f"*{outs[0]}.shape[1:]")
    lines.append("_grid = lambda meta: (_cdiv(_M, meta['BM']) * _cdiv(_N, meta['BN']), _Z)")
    lines.append(f"{name}[_grid]({', '.join(call)})")
    return Emitted(["\n".join(kernel)], lines)
