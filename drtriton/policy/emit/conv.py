"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d, one template for all six.

Implicit GEMM. Per image n and group g, out[n, g*OCg + co, pos] = sum_k X[pos, k] * W[k, co],
where k runs over (taps, c): the kernel's taps times the group's ICg input channels, and
X[pos, k] is the input element that tap reads for output position pos. X is gathered from x as
it is needed (padding and borders masked to zero), never materialised as im2col. A program
computes a tile of BLOCK_M output positions of one image x BLOCK_N output channels with `tl.dot`:
- taps outer, channels inner (ICg >= 16): per tap, the input positions and their bounds are one
  [BLOCK_M] vector, and each BLOCK_K step of channels adds a stride to it. Index arithmetic per
  step is a broadcast add, not a [BLOCK_M, BLOCK_K] unravel of k (as Inductor's template loops).
- few input channels (a network's first layer, ICg < 16): k = (tap, c) flattened, BLOCK_K at a time,
  so the dot is not mostly masked.
Positions are counted within one image: int32 offsets from an int64 image base, and within a 1x1
convolution's tile positions are contiguous, so loads and the store are vectorised. The weight is
read as [g, taps, ICg, OCg] (a row of output channels per (tap, channel), contiguous along the
tile's N): forward relays a weight with several taps out every call (a few kB; `_relaid`).
The accumulator is [positions, channels] (measured on an H200, session 31: 2x faster than
[channels, positions] at the same tiles).

Transposed convolutions use the same template. Output o receives input i through tap k when
o = i*s - p + k*d. Visiting every tap and masking those where o + p - k*d is not a multiple of s
would throw away all but 1/s of the work per axis; instead the outputs are split by residue
r = o mod s (grid axis 2). Within a class exactly the taps k = k0 + t*(s/e), e = gcd(s, d),
contribute, and for o = r + j*s they read i = j + q - t*(d/e): every class is a dense implicit
GEMM with its own, smaller K.

Depthwise convolutions (one input channel per group) make a degenerate GEMM (N = output
channels per group, usually 1): a program takes BLOCK_M positions of one output plane (n, oc)
and accumulates w[oc, tap] * x[n, oc // OCg, window(pos) + tap] over the taps, the weight one
scalar per tap.

fp32 throughout: `tl.dot` runs with input_precision "ieee", or "tf32x3" (three TF32 products,
fp32 accuracy on the tensor cores). Bias and the fragment's epilogue run on the accumulator
before the single store. Channel counts, kernel, stride, padding and dilation are module
constants baked into the kernel; the batch and spatial sizes are run-time arguments, and the
launcher computes the output sizes from the input's shape with PyTorch's formulas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..pointwise import Axes, IndexSpace, PointwiseBlock, shape_check
from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, stored_values
from . import affine, autotune, paren, pow2

OPS = {"conv1d": (1, False), "conv2d": (2, False), "conv3d": (3, False),
       "conv_transpose1d": (1, True), "conv_transpose2d": (2, True), "conv_transpose3d": (3, True)}
AXES = {1: "w", 2: "hw", 3: "dhw"}  # the spatial axes, outermost first (not "l": its tap would be "tl")

# Launch configurations the autotuner picks from on the GPU, clipped to the problem (a channel
# tile no wider than the group, a K step no longer than K). Off the GPU one config, with large
# blocks: the interpreter pays per loop step, not per element.
GEMM_TILES = [  # BLOCK_M positions x BLOCK_N channels; the first four won on an H200 (session 31)
    {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 16, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 4},
]
DIRECT_TILES = [  # positions of one plane per program
    {"BLOCK_M": 512, "num_warps": 4},
    {"BLOCK_M": 256, "num_warps": 4},
    {"BLOCK_M": 1024, "num_warps": 8},
    {"BLOCK_M": 64, "num_warps": 2},
]
CPU_GEMM_TILE = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}
CPU_DIRECT_TILE = {"BLOCK_M": 128}
DOT_MIN = 16  # tl.dot needs every tile dimension >= 16


@dataclass(frozen=True)
class _Conv:
    """What one convolution node computes."""

    transposed: bool
    batched: bool
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    output_padding: tuple[int, ...]
    groups: int
    in_channels: int
    out_channels: int
    bias: bool

    @classmethod
    def of(cls, program: Program, node) -> "_Conv":
        if node.op not in OPS:
            raise Unsupported(f"{node.op} is not a convolution")
        dims, transposed = OPS[node.op]
        a = node.attrs
        ins = program.inputs_of(node)
        x, w = program.values[ins[0]], program.values[ins[1]]
        if any(program.values[v].dtype != "torch.float32" for v in ins):
            raise Unsupported("non-fp32 convolution")
        if len(x.shape) not in (dims + 1, dims + 2):
            raise Unsupported(f"{node.op} of a rank-{len(x.shape)} input")
        per_axis = [tuple(a[k]) for k in ("kernel_size", "stride", "padding", "dilation")]
        per_axis.append(tuple(a.get("output_padding") or (0,) * dims))
        if any(len(t) != dims for t in per_axis):
            raise Unsupported("kernel/stride/padding/dilation of the wrong length")
        groups, in_channels = a["groups"], x.shape[-dims - 1]
        if in_channels % groups or a["out_channels"] % groups:
            raise Unsupported("channels not divisible by groups")
        conv = cls(transposed, len(x.shape) == dims + 2, *per_axis, groups, in_channels, a["out_channels"],
                   a["bias"])
        expected = ((in_channels, conv.out_per_group) if transposed else (conv.out_channels, conv.in_per_group))
        if tuple(w.shape) != expected + conv.kernel:
            raise Unsupported(f"weight of shape {tuple(w.shape)}")
        return conv

    @property
    def dims(self) -> int:
        return len(self.kernel)

    @property
    def in_per_group(self) -> int:
        return self.in_channels // self.groups

    @property
    def out_per_group(self) -> int:
        return self.out_channels // self.groups

    @property
    def taps(self) -> int:
        return math.prod(self.kernel)

    @property
    def direct(self) -> bool:
        """Depthwise: every output channel reads one input channel (no GEMM worth a tl.dot)."""
        return self.groups > 1 and self.in_per_group == 1


@dataclass
class _Axis:
    """One spatial axis of the template: how an output position and a tap meet in the input.

    Expressions are Triton source over the axis' variables: `pos` (a position index, [BLOCK_M])
    and `tap` (a tap index, [BLOCK_K] or a scalar)."""

    name: str  # h
    size: str  # input extent (a kernel argument): H
    out_size: str  # output extent: OH
    extent: str  # positions along the axis for this program: OH, or JH for a residue class
    pos: str  # position index along the axis: oh, or jh within the class
    out: str  # the output coordinate: oh, or rh + jh * 2
    taps: str  # taps along the axis: "3", or TH (per class, at run time)
    tap: str | None  # the tap index (None: the axis has a single tap)
    kernel_index: str  # the tap's index into the weight: kh, or kh0 + th * 2
    start: str  # input coordinate of the window origin: oh * 2 - 1, or jh + qh
    offset: str | None  # signed input offset of the tap: kh * 2, or -th
    bounded: bool  # whether start + offset can leave the input (padding, transposed borders)
    residue: tuple[str, int] | None = None  # (rh, stride): the class this axis splits by
    setup: list[str] = field(default_factory=list)  # per-program lines of the residue class


def _axes(conv: _Conv) -> list[_Axis]:
    axes = []
    for a, k, s, p, d in zip(AXES[conv.dims], conv.kernel, conv.stride, conv.padding, conv.dilation):
        A, o, kv = a.upper(), f"o{a}", f"k{a}"
        single = k == 1  # no tap index along this axis
        if not conv.transposed or s == 1:
            # every tap reaches every output: a convolution reads i = o*s - p + k*d (inside the
            # input when unpadded), a transposed one with stride 1 i = o + p - k*d
            start, offset = ((affine(o, s, -p), affine(kv, d, 0)) if not conv.transposed
                             else (affine(o, 1, p), "-" + affine(kv, d, 0)))
            axes.append(_Axis(name=a, size=A, out_size=f"O{A}", extent=f"O{A}", pos=o, out=o, taps=str(k),
                              tap=None if single else kv, kernel_index="0" if single else kv, start=start,
                              offset=None if single else offset, bounded=conv.transposed or p > 0))
            continue
        # transposed, residue class r: o = r + j*s, reached by taps k = k0 + t*step, reading
        # i = j + q - t*(d/e)
        e = math.gcd(s, d)
        step = s // e
        r, j, t, k0, q, T, J = f"r{a}", f"j{a}", f"t{a}", f"{kv}0", f"q{a}", f"T{A}", f"J{A}"
        setup = [f"# outputs {o} = {r} + {j} * {s}: reached by taps {kv} with ({affine(r, 1, p)} - "
                 f"{affine(kv, d, 0)}) % {s} == 0"]
        if step > 1:  # k0 = (r + p) / e * (d/e)^-1 mod s/e; with step 1, k*d is a multiple of s
            base = affine(r, 1, p) if e == 1 else f"({affine(r, 1, p)}) // {e}"
            inverse = pow(d // e, -1, step)
            setup.append(f"{k0} = ({base})" + (f" * {inverse}" if inverse != 1 else "") + f" % {step}")
        count = str(k) if step == 1 else f"({k} - {k0} + {step - 1}) // {step}"
        if e > 1:  # no tap at all unless e divides r + p
            count = f"{paren(count)} * (({affine(r, 1, p)}) % {e} == 0).to(tl.int32)"
        setup += [f"{T} = {count}",
                  f"{q} = ({affine(r, 1, p) if step == 1 else f'{affine(r, 1, p)} - {affine(k0, d, 0)}'}) // {s}",
                  f"{J} = ({affine(f'O{A}', 1, s - 1)} - {r}) // {s}"]
        axes.append(_Axis(name=a, size=A, out_size=f"O{A}", extent=J, pos=j, out=f"{r} + {affine(j, s, 0)}",
                          taps=T, tap=None if single else t,
                          kernel_index="0" if single else (t if step == 1 else f"{k0} + {affine(t, step, 0)}"),
                          start=f"{j} + {q}", offset=None if single else "-" + affine(t, d // e, 0), bounded=True,
                          residue=(r, s), setup=setup))
    return axes


class _TileSpace(IndexSpace):
    """The output tile, for the epilogue: its coordinates are known (no division of the flat
    offset); those in `scalars` are one value per program (the image, a depthwise plane's
    channel), so an operand varying only along them is one scalar load."""

    def __init__(self, flat: str, mask: str, coords: list[str], scalars: tuple[int, ...] = ()):
        super().__init__(len(coords), flat, mask, sizes=[])
        self.coords = coords
        self.scalars = set(scalars)

    def index(self, d: int) -> str:
        return self.coords[d]

    def axes_of(self, d: int) -> Axes:
        return Axes(self.coords[d], d, d, scalar=d in self.scalars)


def _product(terms: list[str], grouped: bool = True) -> str:
    """The product of `terms` (Triton expressions), literal factors folded; in parentheses
    (`grouped`) when it has several factors."""
    literal = math.prod(int(t) for t in terms if t.isdigit())
    names = [t for t in terms if not t.isdigit()]
    factors = ([str(literal)] if literal != 1 or not names else []) + names
    product = " * ".join(factors)
    return f"({product})" if grouped and len(factors) > 1 else product


def _unravel(flat: str, names: list[str | None], sizes: list[str]) -> list[str]:
    """Lines splitting a row-major index `flat` over `sizes` into `names` (None: skipped). The
    outermost is not reduced modulo its size: the caller masks `flat` against the total."""
    lines = []
    for i, name in enumerate(names):
        if name is None:
            continue
        inner = [s for s in sizes[i + 1:] if s != "1"]
        expr = f"{flat} // {_product(inner)}" if inner else flat
        lines.append(f"{name} = {expr} % {sizes[i]}" if i > 0 else f"{name} = {expr}")
    return lines


def _horner(lead: str | None, terms: list[tuple[str, str | None]]) -> str:
    """The row-major offset ((lead * S0 + t0) * S1 + t1)...; terms are (size, signed term or
    None)."""
    expr = lead
    for size, term in terms:
        if expr is not None:
            expr = f"{expr} * {size}" if " + " not in expr and " - " not in expr else f"({expr}) * {size}"
        if term is not None:
            if expr is None:
                expr = term
            else:
                expr = f"{expr} - {term[1:]}" if term.startswith("-") else f"{expr} + {term}"
    return expr or "0"


def _bcast(expr: str, where: str) -> str:
    """`expr` with a new axis (`where`: "[:, None]" or "[None, :]")."""
    return f"{paren(expr)}{where}"


def _plus(start: str, offset: str | None, broadcast: bool) -> str:
    """start + signed offset: a position vector plus a tap (a [BLOCK_K] vector when
    `broadcast`, giving [BLOCK_M, BLOCK_K]; else a scalar)."""
    if offset is None:
        return start
    sign, term = ("-", offset[1:]) if offset.startswith("-") else ("+", offset)
    if broadcast:
        return f"{_bcast(start, '[:, None]')} {sign} {_bcast(term, '[None, :]')}"
    return f"{start} {sign} {term}"


def is_direct(program: Program, frag: Fragment) -> bool:
    """A depthwise convolution, computed directly (no dot)."""
    try:
        return _Conv.of(program, frag.anchor).direct
    except Unsupported:  # emit says why
        return False


def configs(program: Program, frag: Fragment) -> list[dict]:
    """The dot precision of implicit GEMMs (the autotuner picks the tile on the GPU); depthwise
    convolutions have no dot."""
    try:
        direct = _Conv.of(program, frag.anchor).direct
    except Unsupported:  # emit says why
        return [{}]
    return [{"method": "direct"}] if direct else [{"precision": "ieee"}, {"precision": "tf32x3"}]


def _relaid(conv: _Conv) -> bool:
    """Whether forward relays the weight for the kernel (`_relayout`). PyTorch keeps the taps
    last, so two input channels of one tap are the tap count apart. A 1x1 convolution's
    [OC, ICg] weight is K-major as it is."""
    return not conv.direct and (conv.taps > 1 or conv.transposed)


def _relayout(conv: _Conv, weight: str) -> str:
    """The weight relaid for the kernel's loop: where a step reads one tap's input channels,
    [groups, taps, OCg, ICg], K-major (3x3 convolutions 1.3-1.6x faster than with [groups, taps,
    ICg, OCg] on an H200, session 32 calls 1-2); where k = (tap, c) is flattened (a few input
    channels), [groups, taps, ICg, OCg] (a 7x7 stem of 3 channels 1.3x slower K-major, call 3)."""
    icg, ocg = conv.in_per_group, conv.out_per_group
    # axes of the reshape [groups, OCg, ICg, taps] (transposed: [groups, ICg, OCg, taps])
    o, i = (2, 1) if conv.transposed else (1, 2)
    order = (0, 3, o, i) if _taps_outer(conv) else (0, 3, i, o)
    split = f"{icg}, {ocg}" if conv.transposed else f"{ocg}, {icg}"
    return f"{weight}.reshape({conv.groups}, {split}, -1).permute({', '.join(map(str, order))}).contiguous()"


def _taps_outer(conv: _Conv) -> bool:
    """Whether k runs taps outer, channels inner: enough channels per group to fill a dot's K."""
    return conv.in_per_group >= DOT_MIN or conv.taps == 1


def _tiles(conv: _Conv, device: str) -> list[dict]:
    """Launch configurations, clipped to this convolution and deduplicated."""
    if conv.direct:
        cap = {}
        tiles = DIRECT_TILES if device == "cuda" else [CPU_DIRECT_TILE]
    else:
        k = conv.in_per_group if _taps_outer(conv) else conv.in_per_group * conv.taps
        cap = {"BLOCK_N": max(DOT_MIN, pow2(conv.out_per_group)), "BLOCK_K": max(DOT_MIN, pow2(k))}
        tiles = GEMM_TILES if device == "cuda" else [CPU_GEMM_TILE]
    out = []
    for t in tiles:
        t = {k: min(v, cap[k]) if k in cap else v for k, v in t.items()}
        if conv.transposed and "num_stages" in t:
            # Triton 3.6 software-pipelines the transposed gather wrongly for some shapes: on an
            # H100, KernelBench L1/61 and L1/70 were wrong (5-9% relative error) with every tile
            # at num_stages >= 2 and right at num_stages=1 (docs/benchmarks.md)
            t["num_stages"] = 1
        if t not in out:
            out.append(t)
    return out


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    conv = _Conv.of(program, node)
    if frag.prologue:
        raise Unsupported("a prologue before a convolution")
    ins = program.inputs_of(node)
    x, w = ins[0], ins[1]
    bias = ins[2] if conv.bias else None
    out = node.outputs[0]
    out_shape = list(program.values[out].shape)
    stores = stored_values(program, frag, out_shape)
    epi = PointwiseBlock(program, frag.epilogue, out_shape, known={out}, reserved={"x_ptr", "w_ptr", "bias_ptr"})
    axes = _axes(conv)
    outs = [program.expr(o) for o in stores]
    name = names.kernel(frag.label)
    direct = conv.direct
    prec = config.get("precision", "ieee")

    body = _kernel_body(conv, axes, prec)
    # epilogue on the accumulator, then one store per value needed outside: the image (and a
    # depthwise plane's channel) is one value per program
    spatial = [f"o{a}" if direct else f"o{a}[:, None]" for a in AXES[conv.dims]]
    coords = (["n.to(tl.int64)"] if conv.batched else []) + ["oc" if direct else "oc[None, :]"] + spatial
    scalars = tuple(range(int(conv.batched) + int(direct)))
    env = {out: "acc"}
    body += epi.emit(_TileSpace("out_offs", "out_mask", coords, scalars), env)
    body += [f"tl.store({o}_out + out_offs, {env[v]}, mask=out_mask)" for o, v in zip(outs, stores)]

    sizes = ["N"] + [ax.size for ax in axes] + [ax.out_size for ax in axes]
    params = ["x_ptr", "w_ptr"] + (["bias_ptr"] if bias else []) + epi.params() + [f"{o}_out" for o in outs] + sizes
    blocks = ["BLOCK_M"] + ([] if direct else ["BLOCK_N", "BLOCK_K"])
    kernel = autotune(_tiles(conv, device), sizes, device) + [
        "@triton.jit",
        f"def {name}({', '.join(params)}, {', '.join(f'{b}: tl.constexpr' for b in blocks)}):",
        *(f"    {line}" for line in _header(node.op, conv, axes, frag)),
        *(f"    {line}" for line in body),
    ]
    return Emitted(["\n".join(kernel)], _launcher(program, frag, conv, axes, x, w, bias, epi, outs, stores, name,
                                                   prec))


def _header(op: str, conv: _Conv, axes: list[_Axis], frag: Fragment) -> list[str]:
    """The kernel's opening comment: the sum it computes, in the kernel's own variable names."""
    icg = conv.in_per_group
    ch = "c" if conv.groups == 1 else ("g" if icg == 1 else f"g * {icg} + c")
    taps = ", ".join(ax.kernel_index for ax in axes)
    w_at = f"{ch}, co, {taps}" if conv.transposed else f"oc, {'c' if icg > 1 else '0'}, {taps}"
    x_at = ", ".join(_plus(ax.start, ax.offset, False) for ax in axes)
    over = (f"c < {icg} and " if icg > 1 else "") + f"the {' x '.join(map(str, conv.kernel))} taps"
    groups = "one group" if conv.groups == 1 else f"{conv.groups} groups, oc = g * {conv.out_per_group} + co"
    extra = f", output padding {conv.output_padding}" if conv.transposed else ""
    lines = [f"# {op}: out[n, oc, {', '.join(ax.out for ax in axes)}] = sum over {over} of",
             f"#     w[{w_at}] * x[n, {ch}, {x_at}]  (zero outside x)",
             f"# {groups}; stride {conv.stride}, padding {conv.padding}, dilation {conv.dilation}{extra}."]
    if conv.direct:
        lines += ["# Depthwise: a program takes BLOCK_M positions of one output plane (n, oc) and accumulates",
                  "# tap by tap (a GEMM per group would be a matrix-vector product)."]
    else:
        how = ("one loop over (tap, BLOCK_K input channels)" if _taps_outer(conv)
               else "k = (tap, c) flattened, BLOCK_K at a time (few input channels)")
        lines += [f"# Implicit GEMM per image: {how}; x gathered, reduced with tl.dot.",
                  "# Tiles are [BLOCK_M positions, BLOCK_N channels]; w is read as "
                  + ((f"[g, taps, {'co, c' if _taps_outer(conv) else 'c, co'}] (relaid by forward)."
                      if _relaid(conv) else "it is."))]
    if len(frag.nodes) > 1:
        lines.append(f"# Fused: {frag.label}, on the accumulator before the store.")
    return lines


def _grid_extent(ax: _Axis) -> str:
    """Positions along the axis the grid makes room for: the largest residue class's."""
    # parenthesised whole: the extents are multiplied, and a // after a * binds to the product
    return f"(({affine(ax.out_size, 1, ax.residue[1] - 1)}) // {ax.residue[1]})" if ax.residue else ax.out_size


def _kernel_body(conv: _Conv, axes: list[_Axis], prec: str) -> list[str]:
    direct = conv.direct
    residues = [ax for ax in axes if ax.residue]
    body = ["pid = tl.program_id(0)"]
    if not direct and conv.groups > 1:
        body.append("g = tl.program_id(1)  # the group")
    if residues:
        body.append("cls = tl.program_id(2)  # the residue class of the outputs along the strided axes")
        body += _unravel("cls", [ax.residue[0] for ax in residues], [str(ax.residue[1]) for ax in residues])
        for ax in residues:
            body += ax.setup
    extents = [ax.extent for ax in axes]
    body.append(f"num_m = tl.cdiv({_product([_grid_extent(ax) for ax in axes], grouped=False)}, BLOCK_M)")
    if direct:
        body += ["plane = pid // num_m  # n * OC + oc: one output plane per program",
                 "pid_m = pid % num_m",
                 f"n = plane // {conv.out_channels}",
                 f"oc = plane % {conv.out_channels}"]
    else:
        body += [f"num_n = tl.cdiv({conv.out_per_group}, BLOCK_N)",
                 "pid_n = pid % num_n  # the channel tiles of a position tile run together: its x stays in L2",
                 "pid_m = (pid // num_n) % num_m",
                 "n = pid // (num_n * num_m)  # the image"]
    # positions within the image (int32: the launcher checks an image's sizes)
    body += ["q = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
             f"q_ok = q < {_product(extents)}"]
    body += _unravel("q", [ax.pos for ax in axes], extents)
    body += [f"o{ax.name} = {ax.out}" for ax in residues]
    # window origins: named where bounds are checked, inlined into the offsets otherwise
    starts = {}
    for ax in axes:
        starts[ax.name] = f"i{ax.name}0" if ax.bounded else ax.start
        if ax.bounded:
            body.append(f"i{ax.name}0 = {ax.start}")
    # a bounded axis with a single tap: whether x is read depends on the position alone
    x_ok = "q_ok"
    single = [f"(i{ax.name}0 >= 0) & (i{ax.name}0 < {ax.size})" for ax in axes if ax.bounded and ax.offset is None]
    if single:
        x_ok = "x_ok"
        body.append(f"x_ok = {' & '.join(['q_ok'] + single)}")
    plane_size = _product([ax.size for ax in axes])
    tap_index = _horner(None, [(str(k), ax.kernel_index if ax.tap else None) for k, ax in zip(conv.kernel, axes)])
    bounded = [ax for ax in axes if ax.bounded and ax.offset is not None]
    # a 1x1 convolution of stride 1 reads its own position: contiguous offsets, vectorised loads
    same_positions = not conv.transposed and all(ax.start == ax.pos and ax.offset is None and not ax.bounded
                                                 for ax in axes)
    # what the outer loop counts: the taps (K where k is flattened, below); a residue class with
    # none skips it, a single one needs no loop
    trips = _product([ax.taps for ax in axes], grouped=False)
    if residues:  # the taps reaching this class
        body.append(f"taps = {trips}")
        trips = "taps"
    # a literal tap count unrolls: the tap's offsets fold into constants
    tap_loop = f"for tap in {'range' if residues else 'tl.static_range'}(0, {trips}):"

    def tap_lines() -> tuple[list[str], str, str]:
        """Lines for one tap (a scalar): the input positions it reads ([BLOCK_M]) and their mask."""
        lines = _unravel("tap", [ax.tap for ax in axes], [ax.taps for ax in axes])
        lines += [f"i{ax.name} = {_plus(starts[ax.name], ax.offset, False)}" for ax in bounded]
        ok = " & ".join([x_ok] + [f"(i{ax.name} >= 0) & (i{ax.name} < {ax.size})" for ax in bounded])
        at = "q" if same_positions else _horner(
            None, [(ax.size, f"i{ax.name}" if ax in bounded else _plus(starts[ax.name], ax.offset, False))
                   for ax in axes])
        return lines, at, ok

    if direct:
        chan = "oc" if conv.out_per_group == 1 else f"(oc // {conv.out_per_group})"
        body += [f"x_plane = x_ptr + (n.to(tl.int64) * {conv.in_channels} + {chan}) * {plane_size}",
                 "acc = tl.zeros((BLOCK_M,), dtype=tl.float32)"]
        lines, at, ok = tap_lines()
        lines += [f"wv = tl.load(w_ptr + {affine('oc', conv.taps, 0)}{'' if tap_index == '0' else ' + ' + tap_index})",
                  f"acc += wv * tl.load(x_plane + {at}, mask={ok}, other=0.0)"]
        head, loop = tap_loop, lines
    else:
        icg, ocg = conv.in_per_group, conv.out_per_group
        lead = f"n.to(tl.int64) * {conv.in_channels}" + ("" if conv.groups == 1 else f" + g * {icg}")
        if conv.groups == 1:
            body += ["oc = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)", f"oc_ok = oc < {ocg}"]
            co, w_group = "oc", "w_ptr"
        else:
            body += ["co = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channels within group g",
                     f"oc_ok = co < {ocg}", f"oc = g * {ocg} + co"]
            co, w_group = "co", f"w_ptr + g * {conv.taps * ocg * icg}"

        def w_at(tap: str, c: str) -> str:
            """The weight tile's offsets, [BLOCK_K input channels, BLOCK_N output channels], in
            the layout `_relayout` makes (a 1x1 convolution's [OC, ICg] is both)."""
            if _taps_outer(conv):  # [g, taps, OCg, ICg]
                row = c if tap == "0" else f"{paren(tap)} * {ocg * icg} + {c}"
                return f"{w_group} + ({row})[:, None] + ({co} * {icg})[None, :]"
            row = c if tap == "0" else f"{paren(tap)} * {icg} + {c}"  # [g, taps, ICg, OCg]
            return f"{w_group} + ({row})[:, None] * {ocg} + {co}[None, :]"
        body += [f"x_img = x_ptr + ({lead}) * {plane_size}",
                 "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)"]
        if _taps_outer(conv):
            lines, at, ok = tap_lines()
            lines.append(f"x_tap = x_img + {at}")
            step = ["c = c0 + tl.arange(0, BLOCK_K)",
                    f"c_ok = c < {icg}",
                    f"xv = tl.load(x_tap[:, None] + (c * {plane_size})[None, :], "
                    f"mask={_bcast(ok, '[:, None]')} & c_ok[None, :], other=0.0)",
                    f"wv = tl.load({w_at(tap_index, 'c')}, mask=c_ok[:, None] & oc_ok[None, :], other=0.0)",
                    f'acc += tl.dot(xv, wv, input_precision="{prec}")']
            if trips == "1":
                head, loop = None, lines + [f"for c0 in range(0, {icg}, BLOCK_K):"] + [f"    {line}" for line in step]
            else:
                # one loop over (tap, channel block), not a loop of a few blocks per tap: the
                # software pipeliner overlaps loads only within a loop (1.1-1.3x, session 32)
                body.append(f"kc = tl.cdiv({icg}, BLOCK_K)  # channel blocks per tap")
                head = f"for kk in range(0, {trips} * kc):"
                loop = ["tap = kk // kc", "c0 = (kk - tap * kc) * BLOCK_K"] + lines + step
        else:
            # k = tap * ICg + c: the relaid weight's row, as the taps run
            body.append(f"K = {_product([ax.taps for ax in axes] + [str(icg)], grouped=False)}  # taps x input channels"
                        + (" of this class" if residues else ""))
            trips = "K"
            head = "for k0 in range(0, K, BLOCK_K):"
            loop = ["k = k0 + tl.arange(0, BLOCK_K)", "k_ok = k < K"]
            loop += _unravel("k", [ax.tap for ax in axes] + ["c"], [ax.taps for ax in axes] + [str(icg)])
            loop += [f"i{ax.name} = {_plus(starts[ax.name], ax.offset, True)}" for ax in bounded]
            x_col = _horner("c", [(ax.size, ax.offset) for ax in axes])
            loop += ["x_mask = " + " & ".join([f"{x_ok}[:, None] & k_ok[None, :]"]
                                              + [f"(i{ax.name} >= 0) & (i{ax.name} < {ax.size})" for ax in bounded]),
                     f"xv = tl.load(x_img + {_bcast(_horner(None, [(ax.size, starts[ax.name]) for ax in axes]), '[:, None]')}"
                     f" + {_bcast(x_col, '[None, :]')}, mask=x_mask, other=0.0)",
                     # (without residue classes the row tap * ICg + c is k itself)
                     f"wv = tl.load({w_at('0', 'k') if not residues else w_at(tap_index, 'c')}, "
                     "mask=k_ok[:, None] & oc_ok[None, :], other=0.0)",
                     f'acc += tl.dot(xv, wv, input_precision="{prec}")']
    if residues:
        # A class no tap reaches keeps acc = 0. The guard also keeps its zero tap counts out of
        # the index math, which the pipeliner runs ahead of the loop: without it, Triton 3.6 on
        # the H100 gave wrong results (a division by zero there is undefined, and the compiler
        # took the counts for nonzero).
        body.append(f"if {trips} > 0:")
        head, loop = f"    {head}", [f"    {line}" for line in loop]
    if trips == "1":  # a single tap: no loop
        body += loop
    else:
        body += [head] + [f"    {line}" for line in loop]
    out_plane = _product([ax.out_size for ax in axes])
    out_pos = "q" if same_positions else _horner(None, [(ax.out_size, f"o{ax.name}") for ax in axes])
    if direct:
        if conv.bias:
            body.append("acc += tl.load(bias_ptr + oc)")
        body += [f"out_offs = plane.to(tl.int64) * {out_plane} + {paren(out_pos)}",
                 "out_mask = q_ok"]
    else:
        if conv.bias:
            body.append("acc += tl.load(bias_ptr + oc, mask=oc_ok, other=0.0)[None, :]")
        body += [f"out_offs = n.to(tl.int64) * {conv.out_channels} * {out_plane} + "
                 f"(oc * {out_plane})[None, :] + ({out_pos})[:, None]",
                 "out_mask = q_ok[:, None] & oc_ok[None, :]"]
    return body


def _launcher(program: Program, frag: Fragment, conv: _Conv, axes: list[_Axis], x: str, w: str, bias: str | None,
              epi: PointwiseBlock, outs: list[str], stores: list[str], name: str, prec: str) -> list[str]:
    how = "depthwise, a plane per program" if conv.direct else f"implicit GEMM, tl.dot ({prec})"
    lines = [f"# {frag.label}: Triton, {how}{' with a fused epilogue' if frag.epilogue else ''}",
             f"_x = {program.expr(x)}.contiguous()"]
    first = 2 if conv.batched else 1
    sizes = [f"_{ax.size}" for ax in axes]
    lines.append(f"{', '.join(['_N'] + sizes)} = " + ("_x.shape[0], " if conv.batched else "1, ")
                 + ", ".join(f"_x.shape[{first + i}]" for i in range(conv.dims)))
    for ax, s_name, k, s, p, d, op in zip(axes, sizes, conv.kernel, conv.stride, conv.padding, conv.dilation,
                                          conv.output_padding):
        span = d * (k - 1) + 1  # PyTorch's output sizes
        if conv.transposed:
            size = affine(s_name, s, span + op - 2 * p - s)
        elif s == 1:
            size = affine(s_name, 1, 2 * p - span + 1)
        else:
            size = f"({affine(s_name, 1, 2 * p - span)}) // {s} + 1"
        lines.append(f"_{ax.out_size} = {size}")
    shape = (["_N"] if conv.batched else []) + [str(conv.out_channels)] + [f"_{ax.out_size}" for ax in axes]
    for o, v in zip(outs, stores):
        lines.append(f"{o} = torch.empty({', '.join(shape)}, device=_x.device, dtype={program.values[v].dtype})")
    # offsets within one image are int32 in the kernel
    ins_size = " * ".join([str(conv.in_channels)] + sizes)
    outs_size = " * ".join([str(conv.out_channels)] + [f"_{ax.out_size}" for ax in axes])
    lines += [f"if {ins_size} >= 2**31 or {outs_size} >= 2**31:",
              "    raise ValueError(f\"an image of {tuple(_x.shape[-%d:])} is too large for this module's 32-bit "
              "offsets within an image\")" % (conv.dims + 1)]
    prelude, args = epi.launch_args(f"{outs[0]}.shape")
    lines += prelude
    # positions per program: the largest residue class along strided axes
    extents = [f"_cdiv(_{ax.out_size}, {ax.residue[1]})" if ax.residue else f"_{ax.out_size}" for ax in axes]
    classes = math.prod(ax.residue[1] for ax in axes if ax.residue)
    tiles = f"_cdiv({' * '.join(extents)}, meta['BLOCK_M'])"
    if conv.direct:
        lines.append(f"_grid = lambda meta: (_N * {conv.out_channels} * {tiles}, 1, {classes})")
    else:
        lines.append(f"_grid = lambda meta: (_N * {tiles} * _cdiv({conv.out_per_group}, meta['BLOCK_N']), "
                     f"{conv.groups}, {classes})")
    for v in (w, bias):
        # the channels and taps are the kernel's constants: a weight forward is given (not a
        # parameter) may come in another shape, which is refused rather than read out of bounds
        if v and program.values[v].kind not in ("param", "buffer", "const"):
            lines += shape_check(program.expr(v), program.expr(v), f"tuple({program.expr(v)}.shape)",
                                 str(tuple(program.values[v].shape)), f"{outs[0]}.shape")
    weight = f"{program.expr(w)}.contiguous()"
    if _relaid(conv):
        # K-major: a copy of the weight's few kB per call, not kept, so a weight
        # written in place (through .data too, which no version counter sees) is always read
        lines.append(f"_w = {_relayout(conv, program.expr(w))}")
        weight = "_w"
    call = ["_x", weight] + ([program.expr(bias)] if bias else []) + args + outs
    call += ["_N"] + sizes + [f"_{ax.out_size}" for ax in axes]
    lines.append(f"{name}[_grid]({', '.join(call)})")
    return lines
