"""A fragment left to PyTorch: the captured aten call, rendered as it was traced.

Used for views (allowed in strict mode: they compute nothing) and, in mixed mode, for operators
no emitter handles or where PyTorch's library kernel is the better choice (convolutions).
"""

from __future__ import annotations

from ...ops.operator import float_source
from ..program import Fragment, Program
from . import Emitted


def render_arg(program: Program, a) -> str:
    if isinstance(a, dict) and "value" in a:  # a 0-d tensor constant: aten calls want a tensor
        return program.tensor_expr(a["value"])
    if isinstance(a, dict) and "device" in a:
        return program.device()
    if isinstance(a, list):
        return "[" + ", ".join(render_arg(program, x) for x in a) + "]"
    if isinstance(a, str) and a.startswith("torch."):
        return a  # dtypes, devices, memory formats
    if isinstance(a, float):
        return float_source(a)
    return repr(a)


def call(program: Program, node) -> str:
    target = node.target  # e.g. aten.conv2d.default, or operator.mul on sizes
    if target == "prims.broadcast_in_dim.default":  # (a, shape, kept dims): unsqueeze the others, expand
        a, shape, kept = node.args[:3]
        expr = render_arg(program, a)
        for d in range(len(shape)):
            if d not in kept:
                expr = f"{expr}.unsqueeze({d})"
        return f"{expr}.expand({render_arg(program, shape)})"
    if target == "prims.scalar_tensor.default":  # aten's, same arguments: an allocation
        target = "aten.scalar_tensor.default"
    args = [render_arg(program, a) for a in node.args]
    args += [f"{k}={render_arg(program, v)}" for k, v in node.kwargs.items()]
    return f"{callable_name(target)}({', '.join(args)})"


#: modules of the Python functions tracing keeps (size arithmetic); any other namespace is an
#: operator library's: aten, prims, or one a package registers (transformers' grouped_mm_fallback)
PYTHON_MODULES = ("operator", "builtins", "math", "torch")


def callable_name(target: str) -> str:
    """How generated code calls a captured target: `torch.ops.<namespace>.<op>.<overload>` for
    operators, the dotted name for Python functions (`operator.mul`, `torch.sym_max`, `float`)."""
    if target.split(".", 1)[0] in PYTHON_MODULES:
        return target.removeprefix("builtins.")
    return f"torch.ops.{target}"


def emit(program: Program, frag: Fragment, config: dict | None = None, names=None) -> Emitted:
    lines = []
    own = {n.name for n in frag.nodes}
    # index arithmetic the kernels would have recomputed: computed here first
    first = [n for n in program.recomputed_for(frag.nodes) if n.name not in own]
    for node in first + frag.nodes:
        outs = ", ".join(program.expr(o) for o in node.outputs)
        if node.returns_tuple:
            outs += ","
        lines.append(f"{outs} = {call(program, node)}")
    return Emitted([], lines, pytorch_compute=frag.kind != "view")
