"""Batch normalisation: per-channel statistics over the batch and spatial axes.

The input (contiguous) is viewed as (N, C, S), S the product of the spatial dims; channel c
reduces over the R = N * S elements n*C*S + c*S + s, which are not adjacent, so `rows` does not
apply. Training mode runs three kernels:

1. stats: a grid of (channel blocks, SPLIT chunks of R) programs; each reduces its chunk a
   (BLOCK_R, BLOCK_C) tile at a time to a partial (count, mean, M2), tiles combined with Chan's
   parallel formula (exact two-pass statistics within a tile, no E[x^2] - E[x]^2 cancellation).
   SPLIT makes enough programs when there are few channels.
2. finish: per channel, the SPLIT partials combined in a fixed order (deterministic); writes
   scale = w / sqrt(var + eps) and shift = b - mean * scale, updates running_mean/running_var in
   place (momentum, unbiased variance) and counts the batch in num_batches_tracked, as
   nn.BatchNorm does, so the module is a drop-in replacement.
3. apply: y = x * scale[c] + shift[c] over the flat output (PyTorch's CPU kernel uses the same
   form), then the fused epilogue, one store.

Eval mode (training False) uses the running statistics: apply alone, computing scale and shift
of each element's channel from them (a few cached loads per element, one launch instead of two:
networks are launch-bound). A fused prologue recomputes the input in stats and apply.
"""

from __future__ import annotations

from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, chan_merge, require_private_prologue, stored_values
from . import autotune, empty, input_launch, pow2

#: programs the stats kernel aims for (channel blocks x SPLIT)
TARGET_PROGRAMS = 1024
#: planes at least this long are applied a plane per program row (scalar channel, no division
#: per element); the block of a program covers up to PLANE_BLOCK of a plane's elements
PLANE_MIN = 32
PLANE_BLOCK = 2048


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def _arg(node, i: int) -> str | None:
    a = node.args[i] if i < len(node.args) else None
    return a["value"] if isinstance(a, dict) and "value" in a else None


def _batches_tracked(program: Program, running_mean: str) -> str | None:
    """The num_batches_tracked buffer the captured module counts up next to these statistics
    (capture keeps that in-place add out of the program: the kernel does it)."""
    fqn = program.values[running_mean].fqn or ""
    if not fqn.endswith("running_mean"):
        return None
    want = fqn[: -len("running_mean")] + "num_batches_tracked"
    for n in program.graph.nodes:
        if n.mutates and n.target == "aten.add_.Tensor":
            v = _arg(n, 0)
            if v is not None and program.values[v].fqn == want:
                return v
    return None


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    if node.op != "batch_norm":
        raise Unsupported(node.op)
    attrs = node.attrs
    x, w, b, rm, rv = (_arg(node, i) for i in range(5))
    xs = list(program.values[x].shape)
    if len(xs) < 2:
        raise Unsupported("batch_norm of a rank < 2 input")
    if any(program.values[v].dtype != "torch.float32" for v in (x, w, b, rm, rv) if v is not None):
        raise Unsupported("non-fp32 batch_norm")
    training = attrs["training"]
    if not training and (rm is None or rv is None):
        raise Unsupported("eval mode without running statistics")
    update = training and rm is not None and rv is not None
    momentum = attrs.get("momentum")
    if update and momentum is None:
        raise Unsupported("cumulative running averages (momentum None)")
    if update and any(program.values[v].kind == "input" for v in (rm, rv)):
        # F.batch_norm(x, running_mean, running_var, training=True) with the statistics passed to
        # forward: updating them is modifying forward's inputs, which a converted module may not do
        # (the verifier rejects it), and leaving them stale would be wrong
        raise Unsupported("training batch_norm updates running statistics that are forward's inputs, in place")
    eps = float(attrs["eps"])
    out = node.outputs[0]
    stores = stored_values(program, frag, xs)
    require_private_prologue(program, frag)
    reserved = {"x_ptr", "scale_ptr", "shift_ptr", "rm_ptr", "rv_ptr", "w_ptr", "b_ptr"}
    pro = PointwiseBlock(program, frag.prologue, xs, reserved=reserved)
    epi = PointwiseBlock(program, frag.epilogue, xs, known={out}, reserved=reserved | set(pro.params()))
    rank = len(xs)
    sizes = [f"xsize{d}" for d in range(1, rank)]
    outs = [program.expr(o) for o in stores]
    x_params = pro.params() if frag.prologue else ["x_ptr"]

    def load_x(offs: str, mask: str) -> list[str]:
        if not frag.prologue:
            return [f"xv = tl.load(x_ptr + {offs}, mask={mask}, other=0.0)"]
        env: dict[str, str] = {}
        return pro.emit(IndexSpace(rank, offs, mask, sizes), env) + [f"xv = {env[x]}"]

    kernels, launch = [], []
    spatial = 1
    for v in xs[2:]:
        spatial *= v
    block_c = min(64, pow2(xs[1])) if spatial == 1 else 1  # along C when it is the contiguous axis
    nbt = _batches_tracked(program, rm) if update else None

    if training:
        stats = names.kernel(f"{frag.label} stats")
        body = [
            "cb = tl.program_id(0)",
            "c = cb * BLOCK_C + tl.arange(0, BLOCK_C)",
            "c_mask = c < C",
            "chunk = tl.cdiv(tl.cdiv(R, tl.num_programs(1)), BLOCK_R) * BLOCK_R",
            "lo = tl.program_id(1) * chunk",
            "hi = tl.minimum(lo + chunk, R)",
            "count = tl.zeros((BLOCK_C,), tl.float32)",
            "mean = tl.zeros((BLOCK_C,), tl.float32)",
            "m2 = tl.zeros((BLOCK_C,), tl.float32)",
            "for r0 in range(lo, hi, BLOCK_R):",
            "    r = r0 + tl.arange(0, BLOCK_R)",
            "    r_mask = r < hi",
            "    mask = r_mask[:, None] & c_mask[None, :]",
            "    # element (n, c, s) of r = n * S + s",
            "    x_offs = ((r // S).to(tl.int64) * C * S + r % S)[:, None] + c[None, :].to(tl.int64) * S",
        ]
        body += [f"    {line}" for line in load_x("x_offs", "mask")]
        body += [
            "    n_t = tl.sum(r_mask.to(tl.float32), axis=0)",
            "    mean_t = tl.sum(tl.where(mask, xv, 0.0), axis=0) / n_t",
            "    d = tl.where(mask, xv - mean_t[None, :], 0.0)",
            "    m2_t = tl.sum(d * d, axis=0)",
            "    # merge the tile's (n_t, mean_t, m2_t) into the running statistics",
            *(f"    {line}" for line in chan_merge("n_t", "mean_t", "m2_t")),
            "part = tl.program_id(1) * C + c",
            "tl.store(part_ptr + part, count, mask=c_mask)",
            "tl.store(part_ptr + SPLIT_C + part, mean, mask=c_mask)",
            "tl.store(part_ptr + 2 * SPLIT_C + part, m2, mask=c_mask)",
        ]
        tiles = ([{"BLOCK_R": r, "num_warps": nw} for r, nw in ((1024, 4), (2048, 8), (512, 4))] if block_c == 1
                 else [{"BLOCK_R": r, "num_warps": nw} for r, nw in ((32, 4), (64, 8), (16, 4))])
        kernels.append("\n".join(autotune(tiles, ["R", "C"], device) + [
            "@triton.jit",
            f"def {stats}({', '.join(x_params + ['part_ptr', 'R', 'C', 'S', 'SPLIT_C'] + (sizes if frag.prologue else []))}, "
            "BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):",
            "    # batch_norm statistics, stage 1: a program per (block of channels, chunk of the N * S",
            "    # elements of each); partial (count, mean, M2) per channel",
            *(f"    {line}" for line in body),
        ]))

    def load(ptr: str, c: str, mask: str | None, other: float) -> str:
        return f"tl.load({ptr} + {c}, mask={mask}, other={other})" if mask else f"tl.load({ptr} + {c})"

    def affine_map(c: str, mask: str | None) -> list[str]:
        """scale = w * rstd and shift = b - mean * scale of channels c (mean, rstd known)."""
        return ["scale = rstd" + (f" * {load('w_ptr', c, mask, 1.0)}" if w else ""),
                "shift = " + (f"{load('b_ptr', c, mask, 0.0)} - " if b else "-") + "mean * scale"]

    if training:  # eval mode: apply computes scale and shift itself
        finish = names.kernel(f"{frag.label} finish")
        fparams = ["part_ptr"]
        fparams += (["w_ptr"] if w else []) + (["b_ptr"] if b else []) + ["scale_ptr", "shift_ptr"]
        if update:
            fparams += ["rm_ptr", "rv_ptr"] + (["nbt_ptr"] if nbt else [])
        fparams += ["C", "SPLIT"]
        body = [
            "c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
            "c_mask = c < C",
            "count = tl.zeros((BLOCK,), tl.float32)",
            "mean = tl.zeros((BLOCK,), tl.float32)",
            "m2 = tl.zeros((BLOCK,), tl.float32)",
            "for p in range(0, SPLIT):  # in order: deterministic",
            "    n_p = tl.load(part_ptr + p * C + c, mask=c_mask, other=0.0)",
            "    mean_p = tl.load(part_ptr + (SPLIT + p) * C + c, mask=c_mask, other=0.0)",
            "    m2_p = tl.load(part_ptr + (2 * SPLIT + p) * C + c, mask=c_mask, other=0.0)",
            *(f"    {line}" for line in chan_merge("n_p", "mean_p", "m2_p")),
            "var = m2 / count  # biased: what the batch is normalised with",
            f"rstd = 1.0 / tl.sqrt(var + {eps!r})",
            *affine_map("c", "c_mask"),
        ]
        body += ["tl.store(scale_ptr + c, scale, mask=c_mask)", "tl.store(shift_ptr + c, shift, mask=c_mask)"]
        if update:
            m = float(momentum)
            body += [
                "# running statistics, in place: (1 - momentum) * old + momentum * batch (unbiased variance)",
                "old_mean = tl.load(rm_ptr + c, mask=c_mask, other=0.0)",
                "old_var = tl.load(rv_ptr + c, mask=c_mask, other=0.0)",
                f"tl.store(rm_ptr + c, {1.0 - m!r} * old_mean + {m!r} * mean, mask=c_mask)",
                f"tl.store(rv_ptr + c, {1.0 - m!r} * old_var + {m!r} * (m2 / (count - 1.0)), mask=c_mask)",
            ]
            if nbt:
                body += ["first = tl.program_id(0) == 0",
                         "tl.store(nbt_ptr, tl.load(nbt_ptr, mask=first) + 1, mask=first)"]
        kernels.append("\n".join([
            "@triton.jit",
            f"def {finish}({', '.join(fparams)}, BLOCK: tl.constexpr):",
            "    # batch_norm, per channel: the partial statistics combined, the affine map y = x * scale + shift",
            *(f"    {line}" for line in body),
        ]))

    apply = names.kernel(f"{frag.label} apply" if training else frag.label)
    per_channel = (["scale_ptr", "shift_ptr"] if training
                   else ["rm_ptr", "rv_ptr"] + (["w_ptr"] if w else []) + (["b_ptr"] if b else []))
    # Planes (an (n, c) pair's S elements) when they are long enough: the channel and its scale
    # and shift are one scalar per program; otherwise the flat output, channel per element
    by_plane = PLANE_MIN <= spatial <= 65535 * PLANE_BLOCK  # (a grid's second axis: 65,535 blocks)
    aparams = x_params + per_channel + epi.params() + [f"{o}_out" for o in outs] + (["C", "S"] if by_plane else ["n", "C", "S"])
    aparams += sizes if frag.prologue or frag.epilogue else []
    if by_plane:
        body = ["plane = tl.program_id(0)",
                "c = plane % C",
                "s = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)",
                "mask = s < S",
                "offs = plane.to(tl.int64) * S + s"]
    else:
        body = ["offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
                "mask = offs < n",
                "c = (offs // S) % C"]
    body += load_x("offs", "mask")
    cmask = None if by_plane else "mask"
    if training:
        body += [f"scale = {load('scale_ptr', 'c', cmask, 0.0)}", f"shift = {load('shift_ptr', 'c', cmask, 0.0)}"]
    else:  # the finish kernel's arithmetic, from the running statistics
        body += [f"mean = {load('rm_ptr', 'c', cmask, 0.0)}",
                 f"rstd = 1.0 / tl.sqrt({load('rv_ptr', 'c', cmask, 1.0)} + {eps!r})",
                 *affine_map("c", cmask)]
    body += ["res = xv * scale + shift"]
    env = {out: "res"}
    body += epi.emit(IndexSpace(rank, "offs", "mask", sizes), env)
    body += [f"tl.store({o}_out + offs, {env[v]}, mask=mask)" for o, v in zip(outs, stores)]
    blocks = [{"BLOCK": bl, "num_warps": nw} for bl, nw in ((1024, 4), (2048, 8), (4096, 8))]
    kernels.append("\n".join(([] if by_plane else autotune(blocks, ["n"], device)) + [
        "@triton.jit",
        f"def {apply}({', '.join(aparams)}, BLOCK: tl.constexpr):",
        ("    # batch_norm applied: a program per (plane, block of its S elements), channel c = plane % C"
         if by_plane else "    # batch_norm applied: one pass over the flat output, channel c = (offset // S) % C"),
        *([f"    # fused: {frag.label}"] if len(frag.nodes) > 1 else []),
        *(f"    {line}" for line in body),
    ]))

    # launcher
    mode = "training: batch statistics" if training else "eval: running statistics"
    launch.append(f"# {frag.label}: Triton, batch_norm ({mode}){' fused' if len(frag.nodes) > 1 else ''}")
    pre, dev, xargs = input_launch(program, pro if frag.prologue else None, x)
    launch += pre
    launch.append("_C, _S = _xs[1], math.prod(_xs[2:])")
    sizes_args = ["*_xs[1:]"] if frag.prologue or frag.epilogue else []
    affine = ([program.expr(w)] if w else []) + ([program.expr(b)] if b else [])
    running = [program.expr(rm), program.expr(rv)] if rm and rv else []
    if training:
        pro_sizes = ["*_xs[1:]"] if frag.prologue else []
        launch += [
            f"_scale = torch.empty(2, _C, device={dev}, dtype=torch.float32)  # scale, shift",
            "_R = _xs[0] * _S",
            f"_CB = _cdiv(_C, {block_c})",
            f"_SPLIT = max(1, min(_cdiv(_R, 256), {TARGET_PROGRAMS} // _CB))",
            f"_part = torch.empty(3, _SPLIT, _C, device={dev}, dtype=torch.float32)  # count, mean, M2",
            f"{stats}[(_CB, _SPLIT)]({', '.join(xargs + ['_part', '_R', '_C', '_S', '_SPLIT * _C'] + pro_sizes)}, "
            f"BLOCK_C={block_c})",
        ]
        fargs = ["_part"] + affine + ["_scale", "_scale[1]"]
        if update:
            fargs += running + ([program.expr(nbt)] if nbt else [])
        fargs += ["_C", "_SPLIT"]
        launch.append(f"{finish}[(_cdiv(_C, 128),)]({', '.join(fargs)}, BLOCK=128)")
    for o, v in zip(outs, stores):
        launch.append(f"{o} = {empty('_xs', len(program.values[v].shape), dev, 'torch.float32')}")
    pre, eargs = epi.launch_args(f"{outs[0]}.shape")
    launch += pre
    per_channel_args = ["_scale", "_scale[1]"] if training else running + affine
    aargs = xargs + per_channel_args + eargs + outs + ([] if by_plane else ["_n"]) + ["_C", "_S"] + sizes_args
    if by_plane:  # the block from the plane's length (no tuning: nothing else to choose)
        launch.append(f"_BLOCK = min({PLANE_BLOCK}, _next_pow2(_S))")
        launch.append(f"{apply}[(_xs[0] * _C, _cdiv(_S, _BLOCK))]({', '.join(aargs)}, BLOCK=_BLOCK, "
                      "num_warps=max(1, min(8, _BLOCK // 256)))")
    else:
        launch.append("_n = math.prod(_xs)")
        launch.append(f"{apply}[lambda meta: (_cdiv(_n, meta['BLOCK']),)]({', '.join(aargs)})")
    return Emitted(kernels, launch)
