"""Example inputs for a module that has none: `get_inputs` / `get_init_inputs` written from the
constructor's and `forward`'s signatures, their annotations and defaults, and the layers the
constructor builds.

The values are guesses a user adjusts, but the code always loads: `drtriton.problem.from_source`
accepts it, and the shapes follow the first layer each `forward` argument meets (`nn.Linear(d,
h)` takes `(batch, d)`, `nn.Conv2d(c, ...)` takes `(batch, c, 16, 16)`, ...). Shapes stay small,
so checks also run in the Triton interpreter on a machine without a GPU.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .modules import DocumentIndex, ModuleClass

BATCH = 2
SEQ = 8

# constructor argument names -> a plausible value (the first matching fragment wins)
_INT_BY_NAME = [
    ("num_classes", 10), ("classes", 10), ("vocab", 100), ("num_embeddings", 100),
    ("heads", 2), ("layers", 2), ("depth", 2), ("groups", 1), ("kernel", 3), ("stride", 1),
    ("padding", 1), ("pad", 1), ("dilation", 1), ("seq", SEQ), ("length", SEQ), ("batch", BATCH),
    ("hidden", 32), ("expansion", 2), ("ratio", 2), ("factor", 2), ("experts", 2), ("k", 2),
]
_FLOAT_BY_NAME = [
    ("eps", 1e-5), ("dropout", 0.0), ("drop", 0.0), ("momentum", 0.1), ("slope", 0.01),
    ("temperature", 1.0), ("scale", 1.0), ("alpha", 1.0), ("beta", 1.0), ("margin", 1.0),
    ("min", -1.0), ("max", 1.0), ("value", 0.5), ("p", 0.0),
]
_BOOL_NAMES = ("bias", "affine", "inplace", "batch_first", "bidirectional", "ceil_mode",
               "track_running_stats", "elementwise_affine", "causal", "keepdim", "training")
_AXIS_KEYWORDS = {"dim", "axis", "dims", "start_dim", "end_dim", "dim0", "dim1"}
_AXIS_FUNCS = {"sum", "mean", "max", "min", "prod", "argmax", "argmin", "softmax", "log_softmax",
               "cumsum", "cumprod", "norm", "std", "var", "amax", "amin", "logsumexp", "flip",
               "squeeze", "unsqueeze", "cat", "stack", "transpose", "any", "all", "median",
               "normalize", "glu", "flatten"}

# layer constructor -> (index of the argument that sets the input width, spatial dims, kind)
_LAYERS = {
    "Linear": (0, 0, "tensor"), "LazyLinear": (None, 0, "tensor"), "Bilinear": (0, 0, "tensor"),
    "Conv1d": (0, 1, "tensor"), "Conv2d": (0, 2, "tensor"), "Conv3d": (0, 3, "tensor"),
    "ConvTranspose1d": (0, 1, "tensor"), "ConvTranspose2d": (0, 2, "tensor"),
    "ConvTranspose3d": (0, 3, "tensor"),
    "BatchNorm1d": (0, 0, "tensor"), "BatchNorm2d": (0, 2, "tensor"), "BatchNorm3d": (0, 3, "tensor"),
    "InstanceNorm1d": (0, 1, "tensor"), "InstanceNorm2d": (0, 2, "tensor"),
    "InstanceNorm3d": (0, 3, "tensor"), "GroupNorm": (1, 2, "tensor"),
    "LayerNorm": (0, 0, "normalized"), "RMSNorm": (0, 0, "normalized"),
    "Embedding": (0, 0, "indices"), "EmbeddingBag": (0, 0, "indices"),
    "MultiheadAttention": (0, 0, "sequence"), "TransformerEncoderLayer": (0, 0, "sequence"),
    "TransformerDecoderLayer": (0, 0, "sequence"),
    "LSTM": (0, 0, "sequence"), "GRU": (0, 0, "sequence"), "RNN": (0, 0, "sequence"),
    "MaxPool1d": (None, 1, "tensor"), "MaxPool2d": (None, 2, "tensor"), "MaxPool3d": (None, 3, "tensor"),
    "AvgPool1d": (None, 1, "tensor"), "AvgPool2d": (None, 2, "tensor"), "AvgPool3d": (None, 3, "tensor"),
    "AdaptiveAvgPool2d": (None, 2, "tensor"), "AdaptiveMaxPool2d": (None, 2, "tensor"),
}
_SPATIAL = {1: 32, 2: 16, 3: 8}


@dataclass
class InputsEdit:
    """What to insert: `code` after the class (line `after_line`, at its end), and `import torch`
    at `import_line` when the file does not import it."""

    code: str
    after_line: int
    import_line: int | None
    functions: tuple[str, ...]


def missing(index: DocumentIndex, module: ModuleClass) -> tuple[bool, bool]:
    """(no get_inputs, no get_init_inputs while the constructor needs arguments), as
    `drtriton.problem.from_source` decides."""
    name = module.name
    no_inputs = not index.has_inputs(name)
    init_fn = f"get_init_inputs_{name}" in index.functions or "get_init_inputs" in index.functions
    init = _own_method(module.info.node, "__init__")
    needs_args = init is not None and _required(init)[0] != []
    return no_inputs, (needs_args and not init_fn)


def needs_inputs(index: DocumentIndex, module: ModuleClass) -> bool:
    a, b = missing(index, module)
    return a or b


def _own_method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for n in cls.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
            return n
    return None


def _method(index: DocumentIndex, cls: ast.ClassDef, name: str, seen=()) -> ast.FunctionDef | None:
    """The method as the class sees it: its own, or the first local base's that has it."""
    own = _own_method(cls, name)
    if own is not None or cls.name in seen:
        return own
    local = {c.name: c.node for c in index.classes}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in local:
            found = _method(index, local[base.id], name, (*seen, cls.name))
            if found is not None:
                return found
    return None


def _required(fn: ast.FunctionDef) -> tuple[list[ast.arg], list[tuple[ast.arg, ast.expr]]]:
    """(required positional parameters, (parameter, default) pairs), `self` left out."""
    positional = (fn.args.posonlyargs + fn.args.args)[1:]
    n_defaults = len(fn.args.defaults)
    required = positional[: len(positional) - n_defaults] if n_defaults else positional
    defaults = list(zip(positional[len(positional) - n_defaults:], fn.args.defaults)) if n_defaults else []
    return required, defaults


def _annotation(arg: ast.arg) -> str:
    if arg.annotation is None:
        return ""
    text = ast.unparse(arg.annotation).replace(" ", "")
    for wrapper in ("Optional[", "typing.Optional["):
        if text.startswith(wrapper):
            text = text[len(wrapper):-1]
    return text.split("|")[0]


def _axis_like(name: str, init: ast.FunctionDef | None, forward: ast.FunctionDef | None) -> bool:
    """Whether a constructor argument is used as a dimension index (`dim=self.dim`)."""
    attrs = {name}
    if init is not None:
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        attrs.add(t.attr)

    def refers(e: ast.expr) -> bool:
        if isinstance(e, ast.Name):
            return e.id == name
        return isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self" \
            and e.attr in attrs

    for fn in (init, forward):
        if fn is None:
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            if any(k.arg in _AXIS_KEYWORDS and refers(k.value) for k in node.keywords):
                return True
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in _AXIS_FUNCS:
                # torch.sum(x, d) or x.sum(d): the dimension is the last positional argument
                if node.args and refers(node.args[-1]) and (len(node.args) > 1 or isinstance(node.func, ast.Attribute)):
                    return True
    return False


def _guess(name: str, annotation: str, axis: bool) -> str:
    low = name.lower()
    if annotation in ("bool",) or (not annotation and (low in _BOOL_NAMES or low.startswith(("use_", "is_", "has_")))):
        return "False" if low not in ("bias", "affine", "elementwise_affine", "track_running_stats") else "True"
    if annotation == "str":
        return repr("relu" if "act" in low else "mean" if "reduction" in low else "default")
    if annotation == "float" or (not annotation and any(low == f or low.endswith("_" + f) or low.startswith(f + "_")
                                                         for f, _ in _FLOAT_BY_NAME)):
        for frag, value in _FLOAT_BY_NAME:
            if frag in low and (frag != "p" or low == "p" or low.endswith("_p")):
                return repr(value)
        return "1.0"
    if annotation.startswith(("tuple", "Tuple", "list", "List", "Sequence")):
        inner = _guess(name, "int", False)
        return f"({inner}, {inner})"
    if axis:
        return "1"
    for frag, value in _INT_BY_NAME:
        if frag == "k":
            if low == "k":
                return str(value)
            continue
        if frag in low:
            return str(value)
    return "16"


class _Values(ast.NodeTransformer):
    """Substitutes constructor parameters by the values chosen for them; marks unknown names."""

    def __init__(self, values: dict[str, str], bound: set[str]):
        self.values, self.bound, self.unknown = values, bound, False

    def visit_Name(self, node: ast.Name):
        if node.id in self.values:
            return ast.parse(self.values[node.id], mode="eval").body
        if node.id not in self.bound:
            self.unknown = True
        return node

    def visit_Attribute(self, node: ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            self.unknown = True
            return node
        self.generic_visit(node)
        return node


def _value(expr: ast.expr | None, values: dict[str, str], bound: set[str]) -> str | None:
    if expr is None:
        return None
    sub = _Values(values, bound)
    new = sub.visit(ast.parse(ast.unparse(expr), mode="eval").body)
    if sub.unknown:
        return None
    text = ast.unparse(new)
    try:  # fold constants: `16 * 4` -> `64`
        folded = eval(compile(ast.Expression(new), "<inputs>", "eval"), {"__builtins__": {}}, {})
        if isinstance(folded, (int, float, tuple, list)) and not isinstance(folded, bool):
            return repr(folded)
    except Exception:
        pass
    return text


def _layers(init: ast.FunctionDef | None) -> dict[str, ast.Call]:
    """self.<attr> -> the layer call assigned to it (the first layer of an nn.Sequential)."""
    out: dict[str, ast.Call] = {}
    if init is None:
        return out
    for node in ast.walk(init):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        call = node.value
        while True:
            tail = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            if tail in ("Sequential",) and call.args and isinstance(call.args[0], ast.Call):
                call = call.args[0]
                continue
            break
        for t in node.targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                out[t.attr] = call
    return out


def _post_order(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        yield from _post_order(child)
    yield node


def _mentions(expr: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(expr))


def _tensor(shape: list[str]) -> str:
    return f"torch.rand({', '.join(shape)})"


def _input_for(param: str, forward: ast.FunctionDef, layers: dict[str, ast.Call], values: dict[str, str],
               bound: set[str]) -> tuple[str | None, str]:
    """(the example value for a forward argument, a note) from the first layer it meets."""
    for node in _post_order(forward):
        if not isinstance(node, ast.Call) or not node.args or not _mentions(node.args[0], param):
            continue
        f = node.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"):
            continue
        layer = layers.get(f.attr)
        if layer is None:
            continue
        tail = layer.func.attr if isinstance(layer.func, ast.Attribute) else getattr(layer.func, "id", "")
        rule = _LAYERS.get(tail)
        if rule is None:
            continue
        index, spatial, kind = rule
        width = None
        if index is not None:
            arg = layer.args[index] if len(layer.args) > index else None
            if arg is None:
                keyword = {"Linear": "in_features", "LayerNorm": "normalized_shape", "GroupNorm": "num_channels",
                           "Embedding": "num_embeddings", "MultiheadAttention": "embed_dim",
                           "TransformerEncoderLayer": "d_model", "TransformerDecoderLayer": "d_model",
                           "LSTM": "input_size", "GRU": "input_size", "RNN": "input_size",
                           "RMSNorm": "normalized_shape"}.get(tail, "in_channels" if "Conv" in tail else "num_features")
                arg = next((k.value for k in layer.keywords if k.arg == keyword), None)
            width = _value(arg, values, bound)
            if width is None:
                continue
        note = f"shaped for self.{f.attr} ({tail})"
        if kind == "indices":
            return f"torch.randint(0, {width}, ({BATCH}, {SEQ}))", note
        if kind == "normalized":
            dims = width.strip("()[] ").rstrip(",").split(",") if width.startswith(("(", "[")) else [width]
            return _tensor([str(BATCH)] + [d.strip() for d in dims if d.strip()]), note
        if kind == "sequence":
            batch_first = any(k.arg == "batch_first" and isinstance(k.value, ast.Constant) and k.value.value
                              for k in layer.keywords)
            order = [str(BATCH), str(SEQ)] if batch_first else [str(SEQ), str(BATCH)]
            return _tensor(order + [width]), note
        channels = width if width is not None else "4"
        if spatial == 0:
            return _tensor([str(BATCH), channels]), note
        return _tensor([str(BATCH), channels] + [str(_SPATIAL[spatial])] * spatial), note
    return None, ""


def _matmul_pairs(forward: ast.FunctionDef) -> list[tuple[str, str, bool]]:
    """(left, right, batched) for forward arguments multiplied as matrices."""
    out = []
    for node in ast.walk(forward):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            left, right = node.left, node.right
            batched = False
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            f = node.func
            tail = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if tail not in ("matmul", "mm", "bmm"):
                continue
            left, right = node.args[0], node.args[1]
            batched = tail == "bmm"
        else:
            continue
        if isinstance(left, ast.Name) and isinstance(right, ast.Name):
            out.append((left.id, right.id, batched))
    return out


def generate(index: DocumentIndex, module: ModuleClass) -> InputsEdit:
    """The functions to add for `module` so that it can be checked."""
    cls = module.info.node
    name = module.name
    no_inputs, no_init = missing(index, module)
    if not (no_inputs or no_init):
        no_inputs, no_init = True, True  # asked anyway: write class-specific ones
    init = _method(index, cls, "__init__")
    forward = _method(index, cls, "forward")
    bound = set(index.bound)

    # constructor: a value for every parameter (defaults where given), required ones passed
    values: dict[str, str] = {}
    init_required: list[str] = []
    kwonly_required: list[str] = []
    if init is not None:
        required, defaults = _required(init)
        for arg in required:
            v = _guess(arg.arg, _annotation(arg), _axis_like(arg.arg, init, forward))
            values[arg.arg] = v
            init_required.append(v)
        for arg, default in defaults:
            v = _value(default, {}, bound)
            if v is not None and v != "None":
                values[arg.arg] = v
        kwonly_required = [a.arg for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults) if d is None]

    # forward: tensors shaped for the layer each argument meets first
    fwd_values: list[str] = []
    fwd_notes: list[str] = []
    fwd_names: list[str] = []
    if forward is not None:
        required, _defaults = _required(forward)
        layers = _layers(init)
        first_shape: str | None = None
        pairs = {(left, right): batched for left, right, batched in _matmul_pairs(forward)}
        for arg in required:
            ann = _annotation(arg)
            fwd_names.append(arg.arg)
            if ann in ("int", "float", "bool", "str"):
                fwd_values.append(_guess(arg.arg, ann, False))
                continue
            value, note = _input_for(arg.arg, forward, layers, values, bound)
            left = next(((l, r, b) for (l, r), b in pairs.items() if arg.arg in (l, r)), None)
            if value is None and left is not None:
                l_, r_, batched = left
                shape = ["16", "32"] if arg.arg == l_ else ["32", "8"]
                value = _tensor(([str(BATCH)] if batched else []) + shape)
                note = "shaped for the matrix product"
            if value is None:
                value = first_shape or _tensor([str(BATCH), "16"])
            if first_shape is None and value.startswith("torch.rand("):
                first_shape = value
            fwd_values.append(value)
            if note:
                fwd_notes.append(f"{arg.arg}: {note}")

    specific = not (len(index.modules) == 1 and "get_inputs" not in index.functions
                    and "get_init_inputs" not in index.functions)
    suffix = f"_{name}" if specific else ""
    if not no_inputs:  # only the constructor's are missing: pair them with the inputs there are
        suffix = f"_{name}" if f"get_inputs_{name}" in index.functions else ""
    parts, functions = [], []
    if no_inputs:
        sig = ", ".join(fwd_names)
        comment = f"    # example arguments of {name}.forward({sig})"
        if fwd_notes:
            comment += "; " + "; ".join(fwd_notes)
        parts.append(f"def get_inputs{suffix}():\n{comment}\n    return [{', '.join(fwd_values)}]")
        functions.append(f"get_inputs{suffix}")
    init_names = ", ".join(a.arg for a in _required(init)[0]) if init is not None else ""
    comment = f"    # arguments of {name}({init_names})"
    if kwonly_required:
        comment += f"; keyword-only {', '.join(kwonly_required)} cannot be passed here: give them defaults"
    parts.append(f"def get_init_inputs{suffix}():\n{comment}\n    return [{', '.join(init_required)}]")
    functions.append(f"get_init_inputs{suffix}")

    import_line = None
    if "torch" not in index.bound or index.aliases.get("torch", "torch") != "torch":
        futures = [line for line, future in index.imports if future]
        if futures:
            import_line = max(futures) + 1
        elif index.imports:
            import_line = min(line for line, _ in index.imports)
        else:
            import_line = 0
    return InputsEdit("\n\n\n".join(parts), module.end, import_line, tuple(functions))
