"""A fragment of elementwise operators as one kernel over the flat output.

Each program handles BLOCK consecutive elements of the (contiguous) output; operands of the same
shape are read at the same offset, broadcast ones through their strides. Every value the rest of
the program needs is stored, so a fused chain never recomputes or re-reads.
"""

from __future__ import annotations

from ..pointwise import IndexSpace, PointwiseBlock
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, autotune

# The autotuner picks among these on the GPU; the interpreter uses the first.
BLOCKS = [{"BLOCK": b, "num_warps": w} for b, w in [(1024, 4), (2048, 8), (4096, 8), (512, 4)]]


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    shape = list(program.values[frag.nodes[-1].outputs[0]].shape)
    inside = {n.name for n in frag.nodes}
    stores = [o for n in frag.nodes for o in n.outputs if program.used_outside(o, inside)]
    if any(list(program.values[o].shape) != shape for o in stores):
        raise Unsupported("stored values of different shapes")
    block = PointwiseBlock(program, frag.nodes, shape)
    rank = len(shape)
    sizes = [f"size{d}" for d in range(1, rank)]
    name = names.kernel(frag.label)
    outs = [program.expr(o) for o in stores]
    params = block.params() + [f"{o}_out" for o in outs] + ["n"] + sizes
    space = IndexSpace(rank, "offs", "mask", sizes)
    body = block.emit(space, {})
    kernel = autotune(BLOCKS, ["n"], device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, BLOCK: tl.constexpr):",
        f"    # {frag.label}, fused: one pass over {'x'.join(map(str, shape)) or 'a scalar'} elements",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < n",
        *(f"    {line}" for line in body),
        *(f"    tl.store({o}_out + offs, {o}, mask=mask)" for o in outs),
    ]
    ref = _shape_source(program, frag, shape)
    lines = [f"# {frag.label}: Triton, one kernel"]
    for o, v in zip(outs, stores):
        lines.append(f"{o} = torch.empty({ref}, device={_device(program, frag)}, dtype={program.values[v].dtype})")
    prelude, args = block.launch_args(f"{outs[0]}.shape")
    lines += prelude
    lines.append(f"_n = {outs[0]}.numel()")
    size_args = [f"*{outs[0]}.shape[1:]"] if rank > 1 else []
    lines.append(f"{name}[lambda meta: (triton.cdiv(_n, meta['BLOCK']),)]({', '.join(args + outs + ['_n'] + size_args)})")
    return Emitted(["\n".join(kernel)], lines)


def _shape_source(program: Program, frag: Fragment, shape: list[int]) -> str:
    """The output shape as forward computes it: from an operand of the full shape if there is
    one (so the module works at other sizes too), else the broadcast of the operands."""
    block_inputs = [v for n in frag.nodes for v in program.inputs_of(n) if program.is_tensor(v)]
    for v in block_inputs:
        if list(program.values[v].shape) == shape:
            return f"{program.expr(v)}.shape"
    exprs = ", ".join(f"{program.expr(v)}.shape" for v in dict.fromkeys(block_inputs))
    return f"torch.broadcast_shapes({exprs})"


def _device(program: Program, frag: Fragment) -> str:
    for n in frag.nodes:
        for v in program.inputs_of(n):
            if program.is_tensor(v):
                return f"{program.expr(v)}.device"
    raise Unsupported("no tensor input")
