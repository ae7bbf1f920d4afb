"""Losses: mse, smooth-L1, KL divergence, cross-entropy (class indices) and triplet margin, each
with reduction 'none', 'mean' or 'sum', and a fused prologue on the first input.

Stage 1 computes the loss of each element (pointwise losses), sample (cross-entropy: a
log-sum-exp over the classes) or row (triplet: two distances over the last axis). With
reduction 'none' it stores them; otherwise a fixed number G of programs each sum the losses of
the blocks pid, pid + G, ... into one partial, and stage 2 (one program) adds the G partials in
order and divides: a deterministic two-stage reduction, no atomics. G does not depend on the
block size, so the autotuner can pick any.

`F.mse_loss` and `F.smooth_l1_loss` call `torch.broadcast_tensors` on their operands first:
`absorb_broadcasts` folds that node into the loss fragment (with the pointwise fragment that
computes the first operand as prologue), and the kernel reads the operands through broadcast
strides.
"""

from __future__ import annotations

import math

from ...capture import Node
from ..pointwise import IndexSpace, PointwiseBlock
from ..program import MAX_FRAGMENT_OPS, Fragment, Program
from . import Emitted, Names, Unsupported
from . import autotune, empty, input_launch, pow2

POINTWISE = {"mse_loss", "smooth_l1_loss", "kl_div"}
LOSSES = POINTWISE | {"cross_entropy", "triplet_margin_loss"}
#: the most programs stage 1 launches for a reduced loss (partials stage 2 adds)
MAX_PARTIALS = 1024


BROADCAST = "aten.broadcast_tensors.default"


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def absorb_broadcasts(program: Program, frags: list[Fragment]) -> list[Fragment]:
    """Fold a `broadcast_tensors` node that only feeds a loss into the loss's fragment, and the
    pointwise fragment computing its first operand (when nothing else reads it) as prologue."""
    owner = {n.name: f for f in frags for n in f.nodes}
    dropped: set[int] = set()
    for frag in frags:
        if frag.kind != "loss" or frag.prologue or frag.anchor.op not in LOSSES:
            continue
        ins = program.inputs_of(frag.anchor)
        producers = {program.producer[v].name: program.producer[v] for v in ins if v in program.producer}
        if len(producers) != 1:
            continue
        (b,) = producers.values()
        bf = owner.get(b.name)
        if b.target != BROADCAST or bf is None or bf.kind != "torch" or len(bf.nodes) != 1:
            continue
        if sorted(b.outputs) != sorted(ins) or any(program.used_outside(o, {b.name, frag.anchor.name})
                                                   for o in b.outputs):
            continue
        frag.nodes.insert(0, b)
        dropped.add(id(bf))
        first = program.producer.get(program.inputs_of(b)[0])
        pf = owner.get(first.name) if first is not None else None
        if pf is None or pf.kind != "pointwise" or len(pf.nodes) + 1 > MAX_FRAGMENT_OPS:
            continue
        inside = {n.name for n in pf.nodes} | {b.name}
        if not any(program.used_outside(o, inside) for n in pf.nodes for o in n.outputs):
            frag.prologue = list(pf.nodes)
            frag.nodes[:0] = pf.nodes
            dropped.add(id(pf))
    return [f for f in frags if id(f) not in dropped]


def _operands(program: Program, frag: Fragment, values: list[str], shape: list[int]) -> PointwiseBlock:
    """The prologue as a PointwiseBlock that also loads `values` (the loss's operands the
    prologue does not compute), broadcast to `shape` through strides. A carrier node lists them
    as inputs so the block names and loads them; only the prologue is computed."""
    carrier = Node("operands", "", [{"value": v} for v in values], {}, [])
    block = PointwiseBlock(program, [*frag.prologue, carrier], shape,
                           reserved={"part_ptr", "count_ptr", "t_ptr"})
    block.nodes = list(frag.prologue)
    return block


def _elementwise(op: str, attrs: dict) -> list[str]:
    """`loss` from `xv` (input) and `yv` (target), per element."""
    if op == "mse_loss":
        return ["d = xv - yv", "loss = d * d"]
    if op == "smooth_l1_loss":
        beta = float(attrs.get("beta", 1.0))
        if beta == 0.0:  # PyTorch: plain L1
            return ["loss = tl.abs(xv - yv)"]
        return ["d = tl.abs(xv - yv)", f"loss = tl.where(d < {beta!r}, 0.5 * d * d / {beta!r}, d - {0.5 * beta!r})"]
    if op == "kl_div":  # xlogy(y, y) - y * x: a zero target contributes nothing
        return ["loss = tl.where(yv == 0.0, 0.0, yv * tl.log(yv)) - yv * xv"]
    raise Unsupported(op)


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op, attrs = node.op, node.attrs
    if op not in LOSSES:
        raise Unsupported(op)
    if frag.epilogue:
        raise Unsupported("an epilogue after a loss")
    ins = program.inputs_of(node)
    if len(ins) != (3 if op == "triplet_margin_loss" else 2):
        raise Unsupported(f"{op} with {len(ins)} tensor inputs")
    # operands behind a folded broadcast_tensors: the loss reads the tensors it was given
    src = {v: v for v in ins}
    for b in (n for n in frag.nodes if n.target == BROADCAST):
        src.update(zip(b.outputs, program.inputs_of(b)))
    xs = list(program.values[ins[0]].shape)
    floats = ins[:1] if op == "cross_entropy" else ins
    if any(program.values[v].dtype != "torch.float32" for v in floats):
        raise Unsupported("non-fp32 input")
    if op == "cross_entropy":
        if program.values[ins[1]].dtype != "torch.int64" or len(xs) < 2:
            raise Unsupported("cross_entropy needs (N, C, ...) logits and int64 class indices")
    elif any(list(program.values[v].shape) != xs for v in ins):
        raise Unsupported("loss operands of different shapes")
    if op == "triplet_margin_loss" and not xs:
        raise Unsupported("triplet margin loss of scalars")
    reduction = attrs["reduction"]
    if reduction not in ("none", "mean", "sum"):
        raise Unsupported(f"reduction {reduction}")
    out = node.outputs[0]
    inside = {n.name for n in frag.nodes}
    if any(program.used_outside(o, inside) for n in frag.nodes if n is not node for o in n.outputs):
        raise Unsupported("a prologue value is needed elsewhere")
    reduced = reduction != "none"
    block = _operands(program, frag, [src[v] for v in floats], xs)
    if not block.operands:
        raise Unsupported("no tensor operand to read")
    name = names.kernel(frag.label)
    o = program.expr(out)
    rank = len(xs)
    x_sizes = [f"xsize{d}" for d in range(1, rank)]
    # some operand needs index math (a recomputed one always does)
    strided = bool(block.recomputed) or any(not block.full(v) for v in block.operands)

    def load(offs: str, mask: str) -> list[str]:
        """The loss's float operands at `offs` (prologue computed): xv, then yv and zv."""
        env: dict[str, str] = {}
        lines = block.emit(IndexSpace(rank, offs, mask, x_sizes), env)
        return lines + [f"{var} = {env[src[v]]}" for var, v in zip(("xv", "yv", "zv"), floats)]

    params = block.params() + (["t_ptr"] if op == "cross_entropy" else [])
    params += (["part_ptr"] + (["count_ptr"] if op == "cross_entropy" else [])) if reduced else [f"{o}_out"]
    # the block loop: every program takes blocks pid, pid + G, ... (G programs)
    loop_head = "for blk in range(tl.program_id(0).to(tl.int64), tl.cdiv({n}, {block}), tl.num_programs(0)):"

    if op in POINTWISE:
        params += ["n"]
        meta = "BLOCK: tl.constexpr"
        body = ["acc = tl.zeros((BLOCK,), tl.float32)"] if reduced else []
        body.append(loop_head.format(n="n", block="BLOCK"))
        inner = ["offs = blk * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
        inner += load("offs", "mask")
        inner += _elementwise(op, attrs)
        if reduced:
            inner.append("acc += tl.where(mask, loss, 0.0)")
        else:
            inner.append(f"tl.store({o}_out + offs, loss, mask=mask)")
        body += [f"    {line}" for line in inner]
        if reduced:
            body.append("tl.store(part_ptr + tl.program_id(0), tl.sum(acc, axis=0))")
        what = f"{op} per element"
        tiles = [{"BLOCK": b, "num_warps": w} for b, w in ((2048, 4), (4096, 8), (1024, 4))]
        unit, key = 1024, ["n"]
    elif op == "cross_entropy":
        # samples m = (n, s) over the logits (N, C, S): class c of sample m at n*C*S + c*S + s
        params += ["M", "C", "S", "ignore_index"]
        meta = "BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr"
        body = ["acc = tl.zeros((BLOCK_M,), tl.float32)", "valid_count = tl.zeros((BLOCK_M,), tl.float32)"] \
            if reduced else []
        body.append(loop_head.format(n="M", block="BLOCK_M"))
        inner = [
            "m = blk * BLOCK_M + tl.arange(0, BLOCK_M)",
            "m_mask = m < M",
            "row = (m // S) * C * S + m % S",
            "t = tl.load(t_ptr + m, mask=m_mask, other=ignore_index)",
            "# online log-sum-exp over the classes; the target's logit is picked up on the way",
            'run_max = tl.full((BLOCK_M,), float("-inf"), tl.float32)',
            "run_sum = tl.zeros((BLOCK_M,), tl.float32)",
            "x_t = tl.zeros((BLOCK_M,), tl.float32)",
            "for c0 in range(0, C, BLOCK_C):",
            "    c = c0 + tl.arange(0, BLOCK_C)",
            "    x_mask = m_mask[:, None] & (c < C)[None, :]",
            "    x_offs = row[:, None] + c[None, :].to(tl.int64) * S",
        ]
        inner += [f"    {line}" for line in load("x_offs", "x_mask")]
        inner += [
            '    xv = tl.where(x_mask, xv, float("-inf"))',
            "    new_max = tl.maximum(run_max, tl.max(xv, axis=1))",
            '    safe = tl.where(new_max == float("-inf"), 0.0, new_max)',
            "    run_sum = run_sum * tl.exp(run_max - safe) + tl.sum(tl.exp(xv - safe[:, None]), axis=1)",
            "    run_max = new_max",
            "    x_t += tl.sum(tl.where(c[None, :] == t[:, None], xv, 0.0), axis=1)",
            "valid = m_mask & (t != ignore_index)",
            "loss = tl.where(valid, run_max + tl.log(run_sum) - x_t, 0.0)",
        ]
        if reduced:
            inner += ["acc += loss", "valid_count += valid.to(tl.float32)"]
        else:
            inner.append(f"tl.store({o}_out + m, loss, mask=m_mask)")
        body += [f"    {line}" for line in inner]
        if reduced:
            body += ["tl.store(part_ptr + tl.program_id(0), tl.sum(acc, axis=0))",
                     "tl.store(count_ptr + tl.program_id(0), tl.sum(valid_count, axis=0))"]
        what = "cross-entropy per sample"
        classes = xs[1]
        spatial = math.prod(xs[2:]) if len(xs) > 2 else 1
        if spatial == 1:  # the classes of a sample are contiguous: the tile runs along them
            bc = min(pow2(classes), 1024)
            tiles = [{"BLOCK_M": max(1, t // bc), "BLOCK_C": bc, "num_warps": w} for t, w in ((4096, 4), (8192, 8))]
        else:  # samples are contiguous: the tile runs along them
            bc = min(pow2(classes), 16)
            tiles = [{"BLOCK_M": t // bc, "BLOCK_C": bc, "num_warps": w} for t, w in ((2048, 4), (4096, 8))]
        unit, key = min(t["BLOCK_M"] for t in tiles), ["M", "C", "S"]
    else:  # triplet margin loss: rows of the last axis, distances ||a - p + eps||_2
        params += ["M", "D"]
        meta = "BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr"
        eps, margin = float(attrs["eps"]), float(attrs["margin"])
        body = ["acc = tl.zeros((BLOCK_M,), tl.float32)"] if reduced else []
        body.append(loop_head.format(n="M", block="BLOCK_M"))
        inner = [
            "m = blk * BLOCK_M + tl.arange(0, BLOCK_M)",
            "m_mask = m < M",
            "sq_pos = tl.zeros((BLOCK_M,), tl.float32)",
            "sq_neg = tl.zeros((BLOCK_M,), tl.float32)",
            "for d0 in range(0, D, BLOCK_D):",
            "    d = d0 + tl.arange(0, BLOCK_D)",
            "    x_mask = m_mask[:, None] & (d < D)[None, :]",
            "    x_offs = m[:, None] * D + d[None, :]",
        ]
        inner += [f"    {line}" for line in load("x_offs", "x_mask")]
        inner += [
            f"    dp = tl.where(x_mask, xv - yv + {eps!r}, 0.0)  # pairwise_distance adds eps to the difference",
            f"    dn = tl.where(x_mask, xv - zv + {eps!r}, 0.0)",
            "    sq_pos += tl.sum(dp * dp, axis=1)",
            "    sq_neg += tl.sum(dn * dn, axis=1)",
            f"loss = tl.maximum(tl.sqrt(sq_pos) - tl.sqrt(sq_neg) + {margin!r}, 0.0)",
        ]
        if reduced:
            inner.append("acc += tl.where(m_mask, loss, 0.0)")
        else:
            inner.append(f"tl.store({o}_out + m, loss, mask=m_mask)")
        body += [f"    {line}" for line in inner]
        if reduced:
            body.append("tl.store(part_ptr + tl.program_id(0), tl.sum(acc, axis=0))")
        what = "triplet margin loss per row"
        bd = min(pow2(xs[-1]), 1024)
        tiles = [{"BLOCK_M": max(1, t // bd), "BLOCK_D": bd, "num_warps": w} for t, w in ((4096, 4), (8192, 8))]
        unit, key = min(t["BLOCK_M"] for t in tiles), ["M", "D"]
    if strided:
        params += x_sizes

    stage = "partial sums (stage 1 of 2)" if reduced else "stored"
    kernel = autotune(tiles, key, device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, {meta}):",
        f"    # {what}, {stage}; a program takes blocks pid, pid + G, ... of G programs",
        *([f"    # fused: {frag.label}"] if len(frag.nodes) > 1 else []),
        *(f"    {line}" for line in body),
    ]
    kernels = ["\n".join(kernel)]

    # launcher: the operands' broadcast shape is the loss's element shape (the logits for CE)
    lines = [f"# {frag.label}: Triton, {op} (reduction {reduction}{', two stages' if reduced else ''})"]
    pre, dev, args = input_launch(program, block, None)
    lines += pre
    if op == "cross_entropy":
        lines.append(f"_t = {program.expr(ins[1])}.contiguous()")
        args.append("_t")
    if op in POINTWISE:
        lines.append("_n = math.prod(_xs)")
        sizes, work = ["_n"], "_n"
        out_shape = "_xs"
    elif op == "cross_entropy":
        lines += ["_C, _S = _xs[1], math.prod(_xs[2:])", "_M = _xs[0] * _S"]
        sizes, work = ["_M", "_C", "_S", str(int(attrs["ignore_index"]))], "_M"
        out_shape = "(_xs[0], *_xs[2:])"
    else:
        lines += ["_D = _xs[-1]", "_M = math.prod(_xs[:-1])"]
        sizes, work = ["_M", "_D"], "_M"
        out_shape = "_xs[:-1]"
    lines.append(f"_G = max(1, min(_cdiv({work}, {unit}), {MAX_PARTIALS}))  # programs")
    if reduced:
        lines.append(f"_part = torch.empty(_G, device={dev}, dtype=torch.float32)  # one partial per program")
        args.append("_part")
        if op == "cross_entropy":  # and the number of samples not ignored
            lines.append(f"_count = torch.empty(_G, device={dev}, dtype=torch.float32)")
            args.append("_count")
        lines.append(f"{o} = torch.empty((), device={dev}, dtype=torch.float32)")
    else:
        lines.append(f"{o} = {empty(out_shape, len(program.values[out].shape), dev, 'torch.float32')}")
        args.append(o)
    args += sizes + (["*_xs[1:]"] if strided else [])
    lines.append(f"{name}[(_G,)]({', '.join(args)})")
    if reduced:
        finish = names.kernel(f"{frag.label} finish")
        by_count = op == "cross_entropy" and reduction == "mean"
        if reduction == "sum":
            result = "total"
        elif by_count:  # the mean over the samples whose target is not ignored
            result = "total / tl.sum(counts, axis=0)"
        else:
            result = "total / denom"
        kernels.append("\n".join([
            "@triton.jit",
            f"def {finish}(part_ptr, count_ptr, n_part, out_ptr, denom, BLOCK: tl.constexpr):",
            f"    # {op}, stage 2 of 2: the partials added in a fixed order (deterministic), then the {reduction}",
            "    acc = tl.zeros((BLOCK,), tl.float32)",
            *(["    counts = tl.zeros((BLOCK,), tl.float32)"] if by_count else []),
            "    for p0 in range(0, n_part, BLOCK):",
            "        p = p0 + tl.arange(0, BLOCK)",
            "        acc += tl.load(part_ptr + p, mask=p < n_part, other=0.0)",
            *(["        counts += tl.load(count_ptr + p, mask=p < n_part, other=0.0)"] if by_count else []),
            "    total = tl.sum(acc, axis=0)",
            f"    tl.store(out_ptr, {result})",
        ]))
        counts = "_count" if op == "cross_entropy" else "_part"  # (unread without counts)
        lines.append(f"{finish}[(1,)](_part, {counts}, _G, {o}, float({work}), BLOCK=1024)")
    return Emitted(kernels, lines)
