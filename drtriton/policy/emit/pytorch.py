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
    if node.attrs.get("heads_last"):  # attention laid out (B, L, H, Dv) (recompose._heads_last)
        return f"{_call(program, node)}.transpose(1, 2).contiguous()"
    return _call(program, node)


def _call(program: Program, node) -> str:
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
    if target in FUNCTIONS:
        target = FUNCTIONS[target]
    method = METHODS.get(target) if node.args else None
    if method is not None and set(node.kwargs) <= set(KEYWORD_ONLY.get(method, ())):
        return method_call(program, method, node.args, node.kwargs)
    if target == "aten.alias.default" and not node.kwargs and len(node.args) == 1:
        return f"{render_arg(program, node.args[0])}[...]"  # the same alias, at a method's cost
    if target == "aten.slice.Tensor" and not node.kwargs and _is_tensor(node.args[0]):
        return slicing(program, *node.args)
    args = [render_arg(program, a) for a in node.args]
    args += [f"{k}={render_arg(program, v)}" for k, v in node.kwargs.items()]
    return f"{callable_name(target)}({', '.join(args)})"


#: view and size operators called as Tensor methods, whose arguments are the operator's in
#: order: forward's host time, which sets a small module's speed, is 1.5-2 us a method call
#: against 3-5.5 us through the OpOverload (`torch.ops.aten.view.default(x, ...)`)
METHODS = {
    "aten.view.default": "view", "aten.reshape.default": "reshape", "aten.expand.default": "expand",
    "aten.permute.default": "permute", "aten.transpose.int": "transpose", "aten.t.default": "t",
    "aten.unsqueeze.default": "unsqueeze", "aten.squeeze.dim": "squeeze", "aten.squeeze.dims": "squeeze",
    "aten.select.int": "select", "aten.narrow.default": "narrow", "aten.unflatten.int": "unflatten",
    "aten.as_strided.default": "as_strided", "aten.split.Tensor": "split", "aten.unbind.int": "unbind",
    "aten.chunk.default": "chunk", "aten.diagonal.default": "diagonal", "aten.unfold.default": "unfold",
    "aten.sym_size.int": "size", "aten.sym_stride.int": "stride", "aten.sym_numel.default": "numel",
    "aten.contiguous.default": "contiguous", "aten.clone.default": "clone", "aten._unsafe_view.default": "view",
    "aten.flatten.using_ints": "flatten",
}
#: a method's arguments after the tensor that it takes by keyword only (the operator's keywords
#: among them are passed as they are)
KEYWORD_ONLY = {"contiguous": ("memory_format",), "clone": ("memory_format",)}
#: factories whose `torch` function takes the operator's arguments, keywords included (half
#: the host time of the OpOverload)
FUNCTIONS = {
    "aten.zeros.default": "torch.zeros", "aten.ones.default": "torch.ones", "aten.full.default": "torch.full",
    "aten.empty.memory_format": "torch.empty", "aten.scalar_tensor.default": "torch.scalar_tensor",
    "aten.arange.default": "torch.arange", "aten.arange.start": "torch.arange", "aten.arange.start_step": "torch.arange",
}
#: methods taking a size list as separate numbers (`x.view(2, -1)`, cheaper than `x.view([2, -1])`)
SPREAD_SIZES = {"view", "reshape", "expand", "permute"}


def _is_tensor(a) -> bool:
    return isinstance(a, dict) and "value" in a


def method_call(program: Program, method: str, args: list, kwargs: dict) -> str:
    self, rest = render_arg(program, args[0]), [render_arg(program, a) for a in args[1:]]
    if method in SPREAD_SIZES and len(args) == 2 and isinstance(args[1], list) and args[1]:
        rest = [render_arg(program, a) for a in args[1]]
    if method in KEYWORD_ONLY:
        rest = [f"{k}={v}" for k, v in zip(KEYWORD_ONLY[method], rest)]
    rest += [f"{k}={render_arg(program, v)}" for k, v in kwargs.items()]
    return f"{self}.{method}({', '.join(rest)})"


def slicing(program: Program, a, dim: int = 0, start=None, end=None, step: int = 1) -> str:
    """`aten.slice.Tensor` as Python indexing (`x[:, 2:5]`): the same view, at a method's host cost."""
    if dim < 0:
        dim += len(program.values[a["value"]].shape)
    bound = lambda v: "" if v is None or v == 2**63 - 1 else render_arg(program, v)  # noqa: E731
    part = f"{bound(start)}:{bound(end)}" + (f":{render_arg(program, step)}" if step != 1 else "")
    return f"{render_arg(program, a)}[{':, ' * dim}{part}]"


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
