"""Copies and fills, for a program that computes nothing else.

Capture leaves views, copies (`clone`: what `x.t().contiguous()`, `expand_copy`, `pixel_shuffle`
and `repeat_interleave` end in) and allocations (`ones_like`, `full`) to PyTorch: beside real
compute they cost nothing worth a kernel. A program made only of them (`torch.clone(x)`,
`torch.permute_copy(x, ...)`, `torch.full_like(x, 2.0)`) would then have no kernel at all, which
is no conversion; `materialised` picks its copies and constant fills, and `emit` writes each as
a Triton kernel over the flat, contiguous result: a copy reads every element through the source
view's sizes and strides, a fill stores the constant.
"""

from __future__ import annotations

from ...ops.elementwise import _TL_DTYPES
from ...ops.operator import float_source
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, empty, flat_blocks
from .pytorch import render_arg

COPIES = {"aten.clone.default", "aten.contiguous.default", "aten.lift_fresh_copy.default"}

# allocation -> (the fill value's argument position or the constant, the uninitialised allocation
# that takes the same arguments once the fill value is dropped)
FILLS = {
    "aten.zeros_like.default": (0, "aten.empty_like.default"),
    "aten.ones_like.default": (1, "aten.empty_like.default"),
    "aten.full_like.default": ("arg1", "aten.empty_like.default"),
    "aten.zeros.default": (0, "aten.empty.memory_format"),
    "aten.ones.default": (1, "aten.empty.memory_format"),
    "aten.full.default": ("arg1", "aten.empty.memory_format"),
    "aten.new_zeros.default": (0, "aten.new_empty.default"),
    "aten.new_ones.default": (1, "aten.new_empty.default"),
    "aten.new_full.default": ("arg2", "aten.new_empty.default"),
    "aten.scalar_tensor.default": ("arg0", "aten.empty.memory_format"),
}

BLOCK = 1024
_TL = {f"torch.{name}": tl for name, tl in _TL_DTYPES.items()}


def materialised(program: Program, frags: list[Fragment]) -> set[int]:
    """Indices of the fragments to run as Triton copies and fills: when every fragment is a
    view, a copy or an allocation (nothing computes), those copies and constant fills whose
    values are tensors; else none (a copy beside real kernels stays PyTorch's)."""
    if any(f.kind != "view" for f in frags):
        return set()
    return {i for i, f in enumerate(frags) if len(f.nodes) == 1 and _kind(program, f.nodes[0]) is not None}


def _kind(program: Program, node) -> str | None:
    out = program.values.get(node.outputs[0])
    if out is None or out.dtype not in _TL or len(node.outputs) != 1:
        return None
    if node.target in COPIES and node.args and isinstance(node.args[0], dict) and "value" in node.args[0]:
        src = program.values[node.args[0]["value"]]
        return "copy" if src.dtype == out.dtype and program.is_tensor(src.name) else None
    if node.target in FILLS:
        return "fill" if isinstance(_fill_value(node), (bool, int, float)) else None
    return None


def _fill_position(node) -> int | None:
    """Where the fill value is among the allocation's arguments (None: implied by the name)."""
    value, _ = FILLS[node.target]
    return int(value[3:]) if isinstance(value, str) else None


def _fill_value(node):
    i = _fill_position(node)
    if i is None:
        return FILLS[node.target][0]
    return node.args[i] if len(node.args) > i else node.kwargs.get("fill_value", node.kwargs.get("s"))


def emit(program: Program, frag: Fragment, names: Names) -> Emitted:
    node = frag.nodes[0]
    kind = _kind(program, node)
    if kind is None:
        raise Unsupported(f"{node.target} is neither a copy nor a constant fill")
    out = program.expr(node.outputs[0])
    dtype = _TL[program.values[node.outputs[0]].dtype]
    name = names.kernel(f"{frag.label} {kind}")
    if kind == "copy":
        src = program.expr(node.args[0]["value"])
        rank = len(program.values[node.args[0]["value"]].shape)
        sizes, strides = [f"size{d}" for d in range(rank)], [f"stride{d}" for d in range(rank)]
        body = ["src = offs * 0", "rem = offs"]
        for d in reversed(range(rank)):  # the element's index along each axis, innermost first
            body += [f"src += (rem % {sizes[d]}) * {strides[d]}", f"rem = rem // {sizes[d]}"]
        body.append("tl.store(out_ptr + offs, tl.load(x_ptr + src, mask=mask), mask=mask)")
        kernel = ["@triton.jit",
                  f"def {name}(x_ptr, out_ptr, n, {', '.join(sizes + strides + [''])}"
                  "WIDE: tl.constexpr, BLOCK: tl.constexpr):",
                  f"    # {frag.label}: out (contiguous) = x read through its sizes and strides",
                  *(f"    {line}" for line in flat_blocks() + body)]
        lines = [f"# {frag.label}: Triton copy",
                 f"_x = {src}",
                 f"{out} = {empty('_x.shape', rank, '_x.device', '_x.dtype')}",
                 f"{name}[(max(1, _cdiv({out}.numel(), {BLOCK})),)](_x, {out}, {out}.numel(), "
                 f"{'*_x.shape, *_x.stride(), ' if rank else ''}WIDE={out}.numel() > 2**30, BLOCK={BLOCK})"]
        return Emitted(["\n".join(kernel)], lines)
    value = _fill_value(node)
    literal = float_source(float(value))
    if dtype != "tl.int1" and not dtype.startswith("tl.float"):
        literal = repr(int(value))
    elif dtype == "tl.int1":
        literal = "1" if value else "0"
    kernel = ["@triton.jit",
              f"def {name}(out_ptr, n, WIDE: tl.constexpr, BLOCK: tl.constexpr):",
              f"    # {frag.label}: every element of out is {value!r}",
              *(f"    {line}" for line in flat_blocks()),
              f"    tl.store(out_ptr + offs, tl.full([BLOCK], {literal}, {dtype}), mask=mask)"]
    _, allocator = FILLS[node.target]
    skip = _fill_position(node)
    args = [render_arg(program, a) for i, a in enumerate(node.args) if i != skip]
    if node.target == "aten.scalar_tensor.default":
        args = ["[]"] + args
    args += [f"{k}={render_arg(program, v)}" for k, v in node.kwargs.items() if k not in ("fill_value", "s")]
    lines = [f"# {frag.label}: Triton fill",
             f"{out} = torch.ops.{allocator}({', '.join(args)})",
             f"{name}[(max(1, _cdiv({out}.numel(), {BLOCK})),)]({out}, {out}.numel(), "
             f"WIDE={out}.numel() > 2**30, BLOCK={BLOCK})"]
    return Emitted(["\n".join(kernel)], lines)
