"""Recurrent layers (LSTM, GRU, RNN) with the sequence walked inside one kernel.

Per layer and direction, two kernels:

- the input projection of every step at once, gx = x W_ih^T + b_ih: one product of
  (steps x batch, features) by (features, gates x hidden), read through x's strides (batch first
  or not, a previous layer's output);
- the recurrence: one launch walks the sequence. Each step adds h W_hh^T (+ b_hh) to the step's
  gx, tile by tile of (BB batch rows, BH hidden units), with one tl.dot per gate and BK slice of
  h, applies the gates, and writes the new h to the other half of a double buffer, the step's
  output and (LSTM) the cell state. The tiles of a step are shared among the grid's programs (at
  most one per SM, so all are resident: `_sm_count`), which then wait for each other at a grid
  barrier (an atomic counter) before the next step reads the new h; h is read from L2 (`.cg`).
  On a CPU (the interpreter runs programs one after another) the grid is one program. The wait
  assumes what a forward on one stream gives: no other launch of this process holds SMs the grid
  needs until the grid finishes (another process's kernels are time-sliced, not co-resident).

So a layer takes any sequence length (nothing is unrolled) and launches 2 kernels per direction,
not several per step. The kernel first copies h0 (and c0) into its buffers and its last program
sets the barrier's counters back to zero, so a second launch (the autotuner's trials) computes
the same result.
"""

from __future__ import annotations

from ...ops import get as op_record
from ...ops.recurrent import GATES
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, autotune

PROJECTION_TILES = [
    {"BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 3},
    {"BM": 128, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 3},
    {"BM": 64, "BN": 128, "BK": 32, "num_warps": 4, "num_stages": 3},
]
# BB rows of the batch per program (tl.dot needs 16); hidden units BH at a time, h read BK at a time
RECURRENCE_TILES = [
    {"BB": 16, "BH": 32, "BK": 32, "num_warps": 4},
    {"BB": 16, "BH": 64, "BK": 64, "num_warps": 4},
    {"BB": 32, "BH": 64, "BK": 32, "num_warps": 4},
    {"BB": 16, "BH": 128, "BK": 32, "num_warps": 8},
]


def configs(program: Program, frag: Fragment) -> list[dict]:
    """Variants: the dot precision (fp32 products: "ieee", or three TF32 passes)."""
    return [{"precision": "ieee"}, {"precision": "tf32x3"}]


def _fn(name: str, x: str) -> str:
    """The vocabulary's Triton expression for `name` (the interpreter's too) applied to `x`."""
    return op_record(name).triton_expr({}).format(x=x if x.isidentifier() else f"({x})")


def _gate_lines(op: str) -> list[str]:
    """The step's gates and new state from the accumulators (`acc0..`: gx + h W^T + b_hh for
    each gate), `c_prev` (LSTM) and `h_prev` (GRU); sets `h` (and `c`)."""
    if op == "lstm":  # i, f, g, o
        return [f"i = {_fn('sigmoid', 'acc0')}", f"f = {_fn('sigmoid', 'acc1')}", f"g = {_fn('tanh', 'acc2')}",
                f"o = {_fn('sigmoid', 'acc3')}", "c = f * c_prev + i * g", f"h = o * ({_fn('tanh', 'c')})"]
    if op == "gru":  # r, z from gx + hW; n = tanh(gx_n + r * (h W_n + b_hn)): acc2 holds the hidden part alone
        return [f"r = {_fn('sigmoid', 'gx0 + acc0')}", f"z = {_fn('sigmoid', 'gx1 + acc1')}",
                f"n = {_fn('tanh', 'gx2 + r * acc2')}", "h = (1.0 - z) * n + z * h_prev"]
    return [f"h = {_fn('tanh' if op == 'rnn_tanh' else 'relu', 'gx0 + acc0')}"]


def _projection_kernel(name: str, prec: str, device: str) -> str:
    lines = autotune(PROJECTION_TILES, ["M", "N", "K"], device) + [
        "@triton.jit",
        f"def {name}(x_ptr, sx_t, sx_b, sx_k, w_ptr, sw_n, sw_k, b_ptr, out_ptr, M, N, K, B, HAS_BIAS: tl.constexpr, "
        "BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):",
        "    # gx[t * B + b, n] = sum_k x[t, b, k] * w[n, k] (+ b[n]): every step's input at once",
        "    rm = tl.program_id(0) * BM + tl.arange(0, BM)",
        "    rn = tl.program_id(1) * BN + tl.arange(0, BN)",
        "    rk = tl.arange(0, BK)",
        "    rows = x_ptr + (rm // B).to(tl.int64)[:, None] * sx_t + (rm % B)[:, None] * sx_b",
        "    acc = tl.zeros((BM, BN), dtype=tl.float32)",
        "    for k0 in range(0, K, BK):",
        "        k = k0 + rk",
        "        a = tl.load(rows + k[None, :] * sx_k, mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)",
        "        w = tl.load(w_ptr + rn[None, :] * sw_n + k[:, None] * sw_k, mask=(k[:, None] < K) & (rn[None, :] < N), "
        "other=0.0)",
        f'        acc += tl.dot(a, w, input_precision="{prec}")',
        "    if HAS_BIAS:",
        "        acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]",
        "    out = out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]",
        "    tl.store(out, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))",
    ]
    return "\n".join(lines)


# A grid barrier: this program's stores done (all its threads), one arrival on the counter, then
# wait until every program has arrived `arrived` times. The grid never exceeds the SMs, so all its
# programs are resident and the wait ends; on a CPU the grid is one program.
_BARRIER = [
    "tl.debug_barrier()",
    'tl.atomic_add(sync_ptr, 1, sem="release", scope="gpu")',
    'while tl.atomic_add(sync_ptr, 0, sem="acquire", scope="gpu") < arrived * P:',
    "    pass",
    "tl.debug_barrier()",
]


def _recurrence_kernel(name: str, op: str, prec: str, device: str) -> str:
    gates = GATES[op]
    lstm, gru = op == "lstm", op == "gru"
    acc_init = [f"acc{g} = tl.zeros((BB, BH), dtype=tl.float32)" for g in range(gates)]
    # the step's input projections: added to the accumulators (GRU keeps them apart: r scales
    # only the hidden part of n)
    gx = [f"gx{g} = tl.load(gx_step + {g} * H, mask=m, other=0.0)" for g in range(gates)]
    if lstm:
        gx += [f"acc{g} += gx{g}" for g in range(gates)]
    dots = [f"acc{g} += tl.dot(hk, tl.load(w_cols + {g} * H * sw_n, mask=wm, other=0.0), input_precision=\"{prec}\")"
            for g in range(gates)]
    # a tile: BB rows of the batch by BH hidden units; `block` numbers this program's tiles
    tile = ["b0 = (block % NB) * BB", "j0 = (block // NB) * BH", "rb = b0 + tl.arange(0, BB)",
            "rj = j0 + tl.arange(0, BH)", "m = (rb[:, None] < B) & (rj[None, :] < H)", "at = rb[:, None] * H + rj[None, :]"]
    step = [
        "gx_step = gx_ptr + (t * B + rb).to(tl.int64)[:, None] * (GATES * H) + rj[None, :]",
        *acc_init, *gx,
        "if HAS_BIAS:",
        *(f"    acc{g} += tl.load(b_ptr + {g} * H + rj, mask=rj < H, other=0.0)[None, :]" for g in range(gates)),
        "for k0 in range(0, H, BK):",
        "    rk = k0 + tl.arange(0, BK)",
        "    # h as the other programs left it: read from L2 (.cg), past this SM's L1",
        "    hk = tl.load(cur + rb[:, None] * H + rk[None, :], mask=(rb[:, None] < B) & (rk[None, :] < H), other=0.0, "
        "cache_modifier=\".cg\")",
        "    wm = (rk[:, None] < H) & (rj[None, :] < H)",
        "    w_cols = w_ptr + rj[None, :] * sw_n + rk[:, None] * sw_k  # W_hh's rows of these units, as columns",
        *(f"    {line}" for line in dots),
        *(["c_prev = tl.load(cy_ptr + at, mask=m, other=0.0)"] if lstm else []),
        *(["h_prev = tl.load(cur + at, mask=m, other=0.0, cache_modifier=\".cg\")"] if gru else []),
        *_gate_lines(op),
        *(["tl.store(cy_ptr + at, c, mask=m)"] if lstm else []),
        "tl.store(nxt + at, h, mask=m)",
        "tl.store(out_ptr + t.to(tl.int64) * so_t + rb[:, None] * so_b + col0 + rj[None, :], h, mask=m)",
    ]
    lines = autotune(RECURRENCE_TILES, ["B", "H"], device) + [
        "@triton.jit",
        f"def {name}(gx_ptr, w_ptr, sw_n, sw_k, b_ptr, h0_ptr, sh0_b, sh0_h, c0_ptr, sc0_b, sc0_h, out_ptr, so_t, so_b, "
        "col0, hy_ptr, cy_ptr, hbuf_ptr, sync_ptr, T, B, H, GATES: tl.constexpr, REVERSE: tl.constexpr, "
        "HAS_BIAS: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr):",
        f"    # {op}: the grid's programs share the (batch x hidden) tiles of each step; h in a double",
        "    # buffer; between steps every program waits for all (a grid barrier on sync_ptr[0])",
        "    pid = tl.program_id(0)",
        "    P = tl.num_programs(0)",
        "    NB = tl.cdiv(B, BB)",
        "    tiles = NB * tl.cdiv(H, BH)",
        "    for block in range(pid, tiles, P):  # the initial state into the buffers",
        *(f"        {line}" for line in tile),
        "        tl.store(hbuf_ptr + at, tl.load(h0_ptr + rb[:, None] * sh0_b + rj[None, :] * sh0_h, mask=m, other=0.0), "
        "mask=m)",
        *(["        tl.store(cy_ptr + at, tl.load(c0_ptr + rb[:, None] * sc0_b + rj[None, :] * sc0_h, mask=m, other=0.0), "
           "mask=m)"] if lstm else []),
        "    arrived = 1",
        *(f"    {line}" for line in _BARRIER),
        "    for s in range(0, T):",
        "        t = s",
        "        if REVERSE:",
        "            t = T - 1 - s",
        "        cur = hbuf_ptr + (s % 2) * B * H",
        "        nxt = hbuf_ptr + ((s + 1) % 2) * B * H",
        "        for block in range(pid, tiles, P):",
        *(f"            {line}" for line in tile + step),
        "        arrived += 1",
        *(f"        {line}" for line in _BARRIER),
        "    last = hbuf_ptr + (T % 2) * B * H",
        "    for block in range(pid, tiles, P):",
        *(f"        {line}" for line in tile),
        "        tl.store(hy_ptr + at, tl.load(last + at, mask=m, other=0.0, cache_modifier=\".cg\"), mask=m)",
        "    # the last program out sets the counters back to 0: the next launch (the autotuner's too) starts clean",
        '    if tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu") == P - 1:',
        '        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed", scope="gpu")',
        '        tl.atomic_xchg(sync_ptr, 0, sem="relaxed", scope="gpu")',
    ]
    return "\n".join(lines)


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op, a = node.op, node.attrs
    if frag.prologue or frag.epilogue:
        raise Unsupported("a recurrent layer runs alone")
    if program.values[node.args[0]["value"]].dtype != "torch.float32":
        raise Unsupported("a recurrent layer in another dtype than float32")
    x = program.expr(node.args[0]["value"])
    hx = node.args[1] if isinstance(node.args[1], list) else [node.args[1]]
    if not all(isinstance(h, dict) and "value" in h for h in hx):
        raise Unsupported("an initial state that is not a tensor")
    params = [program.expr(p["value"]) for p in node.args[2]]
    layers, directions, hidden = a["num_layers"], 2 if a["bidirectional"] else 1, a["hidden_size"]
    gates, per = GATES[op], 4 if a["bias"] else 2
    prec = config["precision"]
    proj, rec = names.kernel(f"{op} input projection"), names.kernel(f"{op} recurrence")
    outs = [program.expr(o) for o in node.outputs]
    out, hy, cy = outs[0], outs[1], outs[2] if op == "lstm" else None
    h0 = program.expr(hx[0]["value"])
    c0 = program.expr(hx[1]["value"]) if op == "lstm" else h0  # (unused by the kernel without a cell)
    seq = f"{x}.transpose(0, 1)" if a["batch_first"] else x
    lines = [f"# {op}: Triton, every step's inputs projected at once, then one kernel walks the sequence "
             f"per layer and direction",
             f"_seq = {seq}", "_T, _B = _seq.shape[0], _seq.shape[1]", f"_H = {hidden}",
             f"{hy} = torch.empty({layers * directions}, _B, _H, device=_seq.device, dtype=torch.float32)",
             *([f"{cy} = torch.empty_like({hy})"] if cy else []),
             "_hbuf = torch.empty(2, _B, _H, device=_seq.device, dtype=torch.float32)",
             "_sync = torch.zeros(2, device=_seq.device, dtype=torch.int32)  # the grid barrier's counters",
             "_programs = _sm_count(_seq.device)  # at most one program per SM: all resident for the barrier",
             f"_gx = torch.empty(_T * _B, {gates} * _H, device=_seq.device, dtype=torch.float32)"]
    for layer in range(layers):
        last = layer == layers - 1
        if last and a["batch_first"]:  # the output in the caller's layout, written through its strides
            lines.append(f"_out = torch.empty(_B, _T, {directions} * _H, device=_seq.device, "
                         "dtype=torch.float32).transpose(0, 1)")
        else:
            lines.append(f"_out = torch.empty(_T, _B, {directions} * _H, device=_seq.device, dtype=torch.float32)")
        for d in range(directions):
            k = layer * directions + d
            w_ih, w_hh = params[per * k], params[per * k + 1]
            b_ih, b_hh = (params[per * k + 2], params[per * k + 3]) if a["bias"] else (w_ih, w_hh)
            lines += [
                f"{proj}[lambda meta: (_cdiv(_T * _B, meta['BM']), _cdiv({gates} * _H, meta['BN']))]("
                f"_seq, *_seq.stride(), {w_ih}, *{w_ih}.stride(), {b_ih}, _gx, _T * _B, {gates} * _H, _seq.shape[2], _B, "
                f"HAS_BIAS={a['bias']})",
                f"{rec}[lambda meta: (min(_cdiv(_B, meta['BB']) * _cdiv(_H, meta['BH']), _programs),)]("
                f"_gx, {w_hh}, *{w_hh}.stride(), {b_hh}, "
                f"{h0}[{k}], *{h0}[{k}].stride(), {c0}[{k}], *{c0}[{k}].stride(), _out, _out.stride(0), _out.stride(1), "
                f"{d} * _H, {hy}[{k}], {cy + f'[{k}]' if cy else '_hbuf'}, _hbuf, _sync, _T, _B, _H, GATES={gates}, "
                f"REVERSE={d == 1}, HAS_BIAS={a['bias']})",
            ]
        if not last:  # the next layer reads this one's output
            lines.append("_seq = _out")
    lines.append(f"{out} = _out.transpose(0, 1)" if a["batch_first"] else f"{out} = _out")
    return Emitted([_projection_kernel(proj, prec, device), _recurrence_kernel(rec, op, prec, device)], lines)
