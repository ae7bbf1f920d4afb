"""Kernel emitters: one module per kind of fragment, each turning a fragment and a variant into
Triton kernel sources plus the forward lines that allocate and launch.

An emitter is a module with `configs(program, fragment)` (its variants, best guess first: e.g.
the dot precision; block sizes are left to `@triton.autotune`, except the elementwise kernels,
which launch with one configuration as Inductor's do) and
`emit(program, fragment, config, names, device)` returning `Emitted`, or raising `Unsupported`
(the planner then tries other cuts or, in mixed mode, PyTorch).

The small code-writing helpers every emitter shares live here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..pointwise import Axes


class Unsupported(Exception):
    """This emitter cannot generate this fragment; the message says why."""


@dataclass
class Emitted:
    kernels: list[str]  # @triton.jit sources
    lines: list[str]  # forward lines
    pytorch_compute: bool = False  # the fragment computes in PyTorch (only mixed mode allows it)


class Names:
    """Unique kernel names within one generated module."""

    def __init__(self):
        self.used: set[str] = set()

    def kernel(self, label: str) -> str:
        base = "_".join(label.replace(",", " ").split())[:48] + "_kernel"
        name, i = base, 2
        while name in self.used:
            name, i = f"{base}{i}", i + 1
        self.used.add(name)
        return name


def autotune(configs: list[dict], key: list[str], device: str) -> list[str]:
    """An @triton.autotune decorator over `configs` (dicts of meta-parameters plus num_warps and
    optionally num_stages); off the GPU only the first, so the interpreter never benchmarks."""
    configs = configs if device == "cuda" else configs[:1]
    lines = ["@triton.autotune(", "    configs=["]
    for c in configs:
        meta = ", ".join(f'"{k}": {v}' for k, v in c.items() if k not in ("num_warps", "num_stages"))
        extra = f", num_stages={c['num_stages']}" if "num_stages" in c else ""
        lines.append(f"        triton.Config({{{meta}}}, num_warps={c.get('num_warps', 4)}{extra}),")
    keys = ", ".join(f'"{k}"' for k in key)
    return lines + ["    ],", f"    key=[{keys}],", ")"]


#: configurations one module may tune in all: a whole network has dozens of kernels, and each
#: configuration is a compilation (about a second) before the first call returns
MODULE_TUNING_CONFIGS = 48


#: what a size that follows the data (None) counts as where tiles are chosen: a long axis
DATA_SIZE = 1 << 20


def example_sizes(shape) -> list[int]:
    """A shape's sizes for choosing tiles and grids, a data-dependent one (None) as DATA_SIZE."""
    return [DATA_SIZE if n is None else n for n in shape]


def sizes_follow_data(program, frag) -> bool:
    """Whether a fragment's tensors have sizes known only at run time, from the data (x[mask],
    nonzero: capture leaves those dimensions None)."""
    names = {v for n in frag.nodes for v in (*program.inputs_of(n), *n.outputs)}
    return any(None in program.values[v].shape for v in names if v in program.values)


def bound_tuning(kernels: list[str], budget: int = MODULE_TUNING_CONFIGS, each: int | None = None) -> list[str]:
    """Trim the `@triton.autotune` configuration lists of a module's kernels to the first
    (best-guess) ones so that the module tunes at most about `budget` configurations (or, with
    `each`, to that many per kernel)."""
    counts = [k.count("triton.Config(") for k in kernels]
    if each is None:
        if sum(counts) <= budget:
            return kernels
        each = max(1, budget // sum(1 for c in counts if c))
    trimmed = []
    for kernel, count in zip(kernels, counts):
        if count > each:
            lines, seen = [], 0
            for line in kernel.splitlines():
                if line.lstrip().startswith("triton.Config("):
                    seen += 1
                    if seen > each:
                        continue
                lines.append(line)
            kernel = "\n".join(lines)
        trimmed.append(kernel)
    return trimmed


def stored_values(program, frag, shape) -> list[str]:
    """The values a fragment's kernels store: those needed after it (later nodes, outputs). One
    store per output element, so each must have the output's `shape`, else Unsupported."""
    inside = {n.name for n in frag.nodes}
    stores = [o for n in frag.nodes for o in n.outputs if program.used_outside(o, inside)]
    if any(list(program.values[o].shape) != list(shape) for o in stores) or \
            any(not program.same_shape(o, stores[0]) for o in stores):
        raise Unsupported("stored values of different shapes")
    return stores


def require_private_prologue(program, frag) -> None:
    """A prologue is computed as the anchor reads its input and never stored: none of its
    values may be needed elsewhere."""
    inside = {n.name for n in frag.nodes}
    if any(program.used_outside(o, inside) for n in frag.prologue for o in n.outputs):
        raise Unsupported("a prologue value is needed elsewhere")


#: the grid's second axis holds this many programs
MAX_GRID_1 = 65535
#: outputs of more elements than this use 64-bit offsets (a block past the end must not wrap a
#: 32-bit offset; 64-bit division costs several times more)
WIDE_ELEMENTS = 2**30
WIDE = f"2**{WIDE_ELEMENTS.bit_length() - 1}"  # (as generated code writes it)


def flat_blocks() -> list[str]:
    """A program per BLOCK consecutive elements of a contiguous output of `n` elements: the
    kernel lines declaring `offs` (64-bit when the kernel's WIDE is set) and `mask`. Launch with
    a grid of cdiv(numel, BLOCK) and WIDE=numel > WIDE."""
    return ["pid = tl.program_id(0)",
            "if WIDE:",
            "    pid = pid.to(tl.int64)",
            "offs = pid * BLOCK + tl.arange(0, BLOCK)",
            "mask = offs < n"]


def empty(shape: str, rank: int, device: str, dtype: str) -> str:
    """A forward expression allocating a tensor of `shape` (a forward expression: a tuple display
    or a torch.Size of `rank` sizes). The sizes go to `torch.empty` one by one: a tuple or a
    torch.Size argument costs the host about 1 us more per allocation on CPU, 2 us on a GPU host
    (parsed as a list of possibly symbolic sizes). A 0-d shape stays `()`: `torch.empty()`
    takes no sizes at all."""
    sizes = "()"
    if rank > 0:
        node = ast.parse(shape, mode="eval").body
        sizes = ", ".join(ast.unparse(e) for e in node.elts) if isinstance(node, ast.Tuple) else f"*{shape}"
    return f"torch.empty({sizes}, device={device}, dtype={dtype})"


def allocate_outputs(program, outs: list[str], stores: list[str], shape: str, device: str,
                     epilogue, rank: int) -> tuple[list[str], list[str], list[str]]:
    """Forward lines that allocate a pointwise-shaped kernel's outputs (`outs`, the values
    `stores`, of `shape` on `device`) and count them (`_n`); with the kernel arguments of its
    pointwise block `epilogue` over that shape, and the output's sizes after the first (the
    `sizes` an IndexSpace of `rank` dims reads)."""
    lines = [f"{o} = {empty(shape, len(program.values[v].shape), device, program.values[v].dtype)}"
             for o, v in zip(outs, stores)]
    prelude, args = epilogue.launch_args(f"{outs[0]}.shape", made_from=shape)
    lines += prelude + [f"_n = {outs[0]}.numel()"]
    return lines, args, [f"*{outs[0]}.shape[1:]"] if rank > 1 else []


def row_blocks(k: int, rank: int) -> tuple[list[str], list[Axes]]:
    """A program per (row of dims 0..k-1, block of BLOCK elements of the dims after them) over a
    contiguous output: the kernel lines declaring `row`, `cols`, `mask`, `offs` (64-bit when the
    kernel's WIDE is set), and the Axes saying where an element is (`row` a scalar). Launch with
    a grid of (numel // inner, cdiv(inner, BLOCK)) and WIDE=numel > WIDE."""
    lines = ["row = tl.program_id(0)",
             "if WIDE:",
             "    row = row.to(tl.int64)",
             "cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)",
             "mask = cols < inner",
             "offs = row * inner + cols"]
    axes = [a for a in (Axes("row", 0, k - 1, scalar=True), Axes("cols", k, rank - 1)) if a.first <= a.last]
    return lines, axes


def tile_blocks(t: int, rank: int) -> tuple[list[str], list[Axes]]:
    """A program per (row of the dims other than t and the last, BT x BC tile of dims t and
    last) over a contiguous output: the kernel lines declaring `offs` and `mask` (2-D, 64-bit
    when the kernel's WIDE is set) and the Axes saying where an element is. A tensor laid out
    contiguously along t (a transpose's) is then read along t a column of the tile at a time,
    where a flat block reads it 32 rows apart per warp. Kernel parameters: the sizes
    `size0..size{rank-1}` and `mid`, the elements of the dims between t and the last. Launch
    with a grid of (numel // (size t * size last), cdiv(size t, BT), cdiv(size last, BC))."""
    st, sc = f"size{t}", f"size{rank - 1}"
    lines = ["row = tl.program_id(0)",
             "it = (tl.program_id(1) * BT + tl.arange(0, BT))[:, None]",
             "ic = (tl.program_id(2) * BC + tl.arange(0, BC))[None, :]",
             "if WIDE:",
             "    row, it, ic = row.to(tl.int64), it.to(tl.int64), ic.to(tl.int64)",
             "outer = row // mid",
             "between = row % mid",
             f"mask = (it < {st}) & (ic < {sc})",
             f"offs = ((outer * {st} + it) * mid + between) * {sc} + ic"]
    axes = [Axes("outer", 0, t - 1, scalar=True), Axes("it", t, t), Axes("between", t + 1, rank - 2, scalar=True),
            Axes("ic", rank - 1, rank - 1)]
    return lines, [a for a in axes if a.first <= a.last]


def chan_merge(n: str, mean: str, m2: str) -> list[str]:
    """Lines merging partial statistics (count `n`, `mean`, sum of squared deviations `m2`) into
    the running `count`, `mean`, `m2`: Chan et al.'s parallel formula, exact and free of the
    E[x^2] - E[x]^2 cancellation; an empty partial adds nothing."""
    return [f"total = count + {n}",
            f"frac = tl.where(total > 0, {n} / tl.maximum(total, 1.0), 0.0)",
            f"delta = {mean} - mean",
            "mean += delta * frac",
            f"m2 += {m2} + delta * delta * count * frac",
            "count = total"]


def pow2(n: int) -> int:
    """The smallest power of two >= n (Triton block sizes)."""
    return 1 << max(0, (int(n) - 1).bit_length())


def paren(expr: str) -> str:
    return expr if expr.isidentifier() or expr.isdigit() else f"({expr})"


def affine(var: str, scale: int, shift: int) -> str:
    """`var * scale + shift`, written without the no-op parts."""
    e = var if scale == 1 else f"{var} * {scale}"
    return e if shift == 0 else (f"{e} + {shift}" if shift > 0 else f"{e} - {-shift}")


def input_launch(program, prologue, x: str, scalar: bool = False) -> tuple[list[str], str, list[str]]:
    """Forward lines for an anchor's main input: `_xs` (its shape), the device, and the kernel
    arguments. With a `prologue` block, X is computed in the kernel from the block's operands
    (broadcast through strides); without (None), X itself, made contiguous. `scalar`: X is 0-d,
    read as one element of shape (1,) (the prologue's operands expanded to it)."""
    if prologue is None:
        return [f"_x = {program.expr(x)}.contiguous()", "_xs = _x.shape"], "_x.device", ["_x"]
    source = "(1,)" if scalar else prologue.shape_source()
    lines = [f"_xs = {source}" + ("  # 0-d operands: one element" if scalar else "")]
    pre, args = prologue.launch_args("_xs", made_from=source)
    return lines + pre, prologue.device(), args
