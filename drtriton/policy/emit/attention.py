"""Scaled dot-product attention, flash-attention style: softmax(q k^T * scale + mask) v, optionally
causal or masked, without materialising the L x S scores.

A program owns BLOCK_M query rows of one (batch, head) and BLOCK_DV columns of the output. It
walks the keys in BLOCK_N blocks: scores s = q k^T (a loop over D in BLOCK_D chunks when the head
is wide), then the online softmax keeps a running row maximum m and sum l and rescales the
accumulator, acc = acc * exp(m_old - m_new) + p v; one division at the end. Exponentials are
base 2 with log2(e) folded into the scale. fp32 stays fp32: `tl.dot` runs with input_precision
"ieee", or "tf32x3" as the faster variant. Value heads up to 256 columns (Gemma's) stay in one
program (smaller tiles hold the accumulator); wider ones (KernelBench's D = 1024) are split over
programs in BLOCK_DV columns, each recomputing its scores (registers bound the accumulator).
Causal attention stops at the diagonal block and masks inside it (PyTorch's top-left aligned
mask: key j is visible to query i when j <= i).

A mask (`masked_attention`) is read tile by tile through its broadcast strides, never expanded.
A boolean one hides scores; an additive one is added in natural units, and the softmax's
exponent is scaled by log2(e) only after the row maximum is subtracted: transformers' masks hold
-3.4e38 (float32's lowest), which times log2(e) overflows to -inf and would turn a fully masked
row (uniform weights in PyTorch) into 0/0. Grouped-query attention (`enable_gqa`) reads key and
value head h // GROUP in place of a repeated copy.
"""

from __future__ import annotations

from ...ops.linalg import ATTENTION
from ...ops.operator import float_source
from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, stored_values
from . import autotune

# The autotuner's choices on the GPU (the first is used in the interpreter)
TILES = [
    {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
    {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2},
    {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 3},
]
#: heads of 129-256 value columns (Gemma's 256) get one program over all of them, and smaller
#: tiles to hold that accumulator: split in two, each program recomputed q k^T (1.5x the work;
#: measured on benchmarks/attention/wide_heads.py, H200: the kernel 0.84x the split one's time)
WIDE_TILES = TILES + [
    {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 8, "num_stages": 2},
    {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
    {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2},
]
LOG2E = 1.4426950408889634


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{"precision": "ieee"}, {"precision": "tf32x3"}]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    if node.op not in ATTENTION:
        raise Unsupported(node.op)
    if frag.prologue:
        raise Unsupported("a prologue before attention")
    operands = program.inputs_of(node)
    q, k, v = operands[:3]
    mask = operands[3] if node.op == "masked_attention" else None
    shapes = [list(program.values[t].shape) for t in (q, k, v)]
    if any(program.values[t].dtype != "torch.float32" for t in (q, k, v)):
        raise Unsupported("non-fp32 attention")
    if any(len(s) != len(shapes[0]) or not 2 <= len(s) <= 4 for s in shapes):
        raise Unsupported("attention operands of ranks other than 2-4, or of different ranks")
    out = node.outputs[0]
    so = list(program.values[out].shape)
    # (B, H, L, Dv), or (B, L, H, Dv) where the heads are merged next (recompose._heads_last)
    heads_last = bool(node.attrs.get("heads_last"))
    rows = [so[0], so[2], so[1]] if heads_last else so[:-1]
    if rows != shapes[0][:-1] or (heads_last and len(so) != 4):
        raise Unsupported("a query with fewer batch rows than the keys (the output follows the query)")
    boolean = mask is not None and program.values[mask].dtype == "torch.bool"
    if mask is not None and not boolean and program.values[mask].dtype != "torch.float32":
        raise Unsupported(f"an attention mask of {program.values[mask].dtype}")
    additive = mask is not None and not boolean
    stores = stored_values(program, frag, so)
    epi = PointwiseBlock(program, frag.epilogue, so, known={out}, reserved={"q_ptr", "k_ptr", "v_ptr", "m_ptr"})
    causal = bool(node.attrs.get("is_causal"))
    gqa = bool(node.attrs.get("enable_gqa"))
    prec = config["precision"]
    name = names.kernel(frag.label)
    outs = [program.expr(o) for o in stores]
    rank = len(so)
    sizes = [f"osize{d}" for d in range(1, rank)]
    strides = [f"s{t}_{a}" for t in "qkv" for a in ("b", "h", "l", "d")]
    strides += ["sm_b", "sm_h", "sm_l", "sm_s"] if mask is not None else []
    params = ["q_ptr", "k_ptr", "v_ptr"] + (["m_ptr"] if mask is not None else []) + epi.params() + [f"{o}_out" for o in outs]
    params += ["H", "GROUP", "L", "S", "D", "DV", "qk_scale"] + strides + (sizes if frag.epilogue else [])

    env = {out: "res"}
    epi_lines = epi.emit(IndexSpace(rank, "o_offs", "o_mask", sizes), env)
    body = [
        "pid_m = tl.program_id(0)",
        "z = tl.program_id(1)  # batch * H + head",
        "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "rdv = tl.program_id(2) * BLOCK_DV + tl.arange(0, BLOCK_DV)",
        "rd = tl.arange(0, BLOCK_D)",
        "m_ok = rm < L",
        "q_rows = q_ptr + (z // H).to(tl.int64) * sq_b + (z % H).to(tl.int64) * sq_h + rm[:, None].to(tl.int64) * sq_l",
        "kv_h = ((z % H) // GROUP).to(tl.int64)  # the key/value head (GROUP query heads share one)",
        "k_base = k_ptr + (z // H).to(tl.int64) * sk_b + kv_h * sk_h",
        "v_base = v_ptr + (z // H).to(tl.int64) * sv_b + kv_h * sv_h",
        *(["m_rows = m_ptr + (z // H).to(tl.int64) * sm_b + (z % H).to(tl.int64) * sm_h"
           " + rm[:, None].to(tl.int64) * sm_l"] if mask is not None else []),
        "if ONE_D_BLOCK:  # the whole head fits one block: q stays in registers",
        "    q = tl.load(q_rows + rd[None, :] * sq_d, mask=m_ok[:, None] & (rd < D)[None, :], other=0.0)",
        'm_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)',
        "l_i = tl.zeros((BLOCK_M,), tl.float32)",
        "acc = tl.zeros((BLOCK_M, BLOCK_DV), tl.float32)",
    ]
    if causal:
        body.append("hi = tl.minimum(S, (pid_m + 1) * BLOCK_M)  # no key block past the diagonal")
    body += [
        f"for n0 in range(0, {'hi' if causal else 'S'}, BLOCK_N):",
        "    rn = n0 + tl.arange(0, BLOCK_N)",
        "    n_ok = rn < S",
        "    k_cols = k_base + rn[None, :].to(tl.int64) * sk_l",
        "    if ONE_D_BLOCK:",
        "        kt = tl.load(k_cols + rd[:, None] * sk_d, mask=(rd < D)[:, None] & n_ok[None, :], other=0.0)",
        f'        s = tl.dot(q, kt, input_precision="{prec}")',
        "    else:  # a wide head: the scores accumulate over D in BLOCK_D chunks",
        "        s = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)",
        "        for d0 in range(0, D, BLOCK_D):",
        "            d = d0 + rd",
        "            qc = tl.load(q_rows + d[None, :] * sq_d, mask=m_ok[:, None] & (d < D)[None, :], other=0.0)",
        "            kt = tl.load(k_cols + d[:, None] * sk_d, mask=(d < D)[:, None] & n_ok[None, :], other=0.0)",
        f'            s += tl.dot(qc, kt, input_precision="{prec}")',
    ]
    visible = "n_ok[None, :]" + (" & (rn[None, :] <= rm[:, None])" if causal else "")
    if mask is not None:
        body.append("    mv = tl.load(m_rows + rn[None, :].to(tl.int64) * sm_s, mask=m_ok[:, None] & n_ok[None, :], "
                    f"other={'0' if boolean else '0.0'})")
    if additive:
        body.append("    s = s * qk_scale + mv  # natural units: see the module's note on -3.4e38 masks")
    else:
        body.append("    s = s * qk_scale  # the scale and log2(e): base-2 exponentials below")
    if boolean:
        visible += " & (mv != 0)"
    to_base2 = f" * {LOG2E!r}" if additive else ""  # else folded into qk_scale
    body += [
        f"    visible = {visible}",
        '    s = tl.where(visible, s, float("-inf"))',
        "    m_new = tl.maximum(m_i, tl.max(s, axis=1))",
        '    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing visible yet',
        f"    alpha = tl.exp2((m_i - m_safe){to_base2})",
        f"    p = tl.exp2((s - m_safe[:, None]){to_base2})",
        "    l_i = l_i * alpha + tl.sum(p, axis=1)",
        "    vv = tl.load(v_base + rn[:, None].to(tl.int64) * sv_l + rdv[None, :] * sv_d,",
        "                 mask=n_ok[:, None] & (rdv < DV)[None, :], other=0.0)",
        f'    acc = acc * alpha[:, None] + tl.dot(p, vv, input_precision="{prec}")',
        "    m_i = m_new",
    ]
    if node.attrs.get("zero_empty_rows"):  # PyTorch's safe softmax: a row the mask hides entirely is 0
        body.append("res = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]")
    else:
        body.append("res = acc / l_i[:, None]")
    body += [
        "o_mask = m_ok[:, None] & (rdv < DV)[None, :]",
        "o_offs = (((z // H).to(tl.int64) * L + rm[:, None]) * H + z % H) * DV + rdv[None, :]" if heads_last else
        "o_offs = (z.to(tl.int64) * L + rm[:, None]) * DV + rdv[None, :]",
        *epi_lines,
        *(f"tl.store({o}_out + o_offs, {env[s]}, mask=o_mask)" for o, s in zip(outs, stores)),
    ]
    what = "causal attention" if causal else "attention" if mask is None else "masked attention"
    wide = isinstance(so[-1], int) and 128 < so[-1] <= 256
    kernel = autotune(WIDE_TILES if wide else TILES, ["L", "S", "D", "DV"], device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, "
        "BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, ONE_D_BLOCK: tl.constexpr):",
        f"    # {what}, online softmax over key blocks; a program per "
        "(BLOCK_M queries, batch x head, BLOCK_DV output columns)",
        *(["    # the output laid out (batch, query, head, column): the heads merged as stored"] if heads_last else []),
        *([f"    # fused: {frag.label}"] if len(frag.nodes) > 1 else []),
        *(f"    {line}" for line in body),
    ]

    # launcher: (..., L, D) operands viewed as (B, H, L, D), broadcast batch dims stride 0; grouped
    # keys and values keep their own head count
    lead = {4: "", 3: "[None]", 2: "[None, None]"}[len(shapes[0])]
    eq, ek, ev = (program.expr(t) for t in (q, k, v))
    heads = "_k.shape[1]" if gqa else "_H"
    fused = " with a fused epilogue" if frag.epilogue else ""
    lines = [f"# {frag.label}: Triton, flash attention (tl.dot {prec}){fused}",
             f"_q = {eq}{lead}",
             "_B, _H, _L, _D = _q.shape",
             f"_k = {ek}{lead}",
             f"_k = _k.expand(_B, {heads}, *_k.shape[-2:])",
             f"_v = {ev}{lead}.expand(_B, {heads}, *{ev}.shape[-2:])",
             "_S, _DV = _v.shape[-2:]"]
    if mask is not None:
        lines.append(f"_m = {program.expr(mask)}.expand(_B, _H, _L, _S)  # a view: broadcast dims read at stride 0")
    for o in outs:
        sizes_out = "_B, _L, _H, _DV" if heads_last else f"*{eq}.shape[:-1], _DV"
        lines.append(f"{o} = torch.empty({sizes_out}, device={eq}.device, dtype=torch.float32)")
    prelude, args = epi.launch_args(f"{outs[0]}.shape")
    lines += prelude
    lines += [
        "_BD = max(16, _next_pow2(_D)) if _D <= 128 else 64  # one block for heads up to 128",
        "_BDV = max(16, _next_pow2(_DV)) if _DV <= 256 else 128  # columns over programs past 256",
        f"_grid = lambda meta: (_cdiv(_L, meta['BLOCK_M']), _B * _H, _cdiv(_DV, _BDV))",
    ]
    scale = node.attrs.get("scale")
    scale_src = "_D ** -0.5" if scale is None else float_source(float(scale))
    if not additive:
        scale_src = f"{scale_src} * {LOG2E!r}"
    group = f"_H // {heads}" if gqa else "1"
    call = ["_q", "_k", "_v"] + (["_m"] if mask is not None else []) + args + outs
    call += ["_H", group, "_L", "_S", "_D", "_DV", scale_src, "*_q.stride()", "*_k.stride()", "*_v.stride()"]
    call += ["*_m.stride()"] if mask is not None else []
    if frag.epilogue and rank > 1:
        call.append(f"*{outs[0]}.shape[1:]")
    lines.append(f"{name}[_grid]({', '.join(call)}, BLOCK_D=_BD, BLOCK_DV=_BDV, ONE_D_BLOCK=_D <= _BD)")
    return Emitted(["\n".join(kernel)], lines)
