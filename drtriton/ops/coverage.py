"""The vocabulary document: the operator table and its KernelBench Level 1/2 coverage.

    python -m drtriton.ops.coverage > docs/vocabulary.md

Coverage is measured, not declared: every KernelBench problem is built and run on the ``meta``
device (no memory, no compute) under a ``TorchFunctionMode`` that records each torch call;
calls made inside built-in ``torch.nn`` modules are attributed to the module. Each call is then
mapped onto the vocabulary through the operators' capture data (``torch_functions``,
``tensor_methods``, ``module_types``), with the argument checks a capture pass needs to tell
``x + y`` (add) from ``x + 1.0`` (add_scalar) or ``torch.max(x, 1)`` (reduction) from
``torch.max(x, y)`` (maximum). Data movement (views, reshapes, indexing, ``cat``) is not
compute and is listed separately.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from drtriton.ops import CATEGORIES, VOCABULARY
from drtriton.ops.layout import DATA_MOVEMENT_FUNCTIONS, DATA_MOVEMENT_METHODS

DEFAULT_KERNELBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "kernelbench"
#: shape queries and no-ops: neither compute nor data movement
_IGNORED = {"size", "dim", "shape", "__get__", "numel", "__len__", "__bool__", "__format__", "__repr__",
            "item", "__index__", "__setstate__", "requires_grad_"}


def _resolve(qualname: str):
    module, _, attr = qualname.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None


@dataclass
class Index:
    """Capture data of the whole vocabulary, resolved to objects."""

    functions: dict = field(default_factory=lambda: defaultdict(list))  # id(callable) -> op names
    methods: dict = field(default_factory=lambda: defaultdict(list))  # method name -> op names
    modules: dict = field(default_factory=dict)  # nn.Module class -> op name

    @classmethod
    def build(cls) -> "Index":
        index = cls()
        for name, op in VOCABULARY.items():
            for qualname in op.torch_functions:
                obj = _resolve(qualname)
                if obj is not None:
                    index.functions[id(obj)].append(name)
            for method in op.tensor_methods:
                index.methods[method].append(name)
            for qualname in op.module_types:
                obj = _resolve(qualname)
                if obj is not None:
                    index.modules[obj] = name
        return index


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def choose(candidates: list[str], args: tuple, kwargs: dict) -> str:
    """Pick among operators sharing a callable, by argument types."""
    if len(candidates) == 1:
        return candidates[0]
    tensors = [a for a in args if _is_tensor(a)]
    scalar = any(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)
    pick = set(candidates)
    if "div_trunc" in pick:  # torch.div(x, y, rounding_mode="trunc"); "floor" is PyTorch's (not ours)
        if kwargs.get("rounding_mode") == "trunc":
            return "div_trunc"
        candidates = [c for c in candidates if c != "div_trunc"]
        pick.discard("div_trunc")
    if {"add", "add_scalar"} & pick or {"mul", "mul_scalar"} & pick or {"div", "div_scalar"} & pick:
        scalar_form = [c for c in candidates if c.endswith("_scalar")]
        tensor_form = [c for c in candidates if not c.endswith("_scalar")]
        return (scalar_form if scalar and len(tensors) == 1 else tensor_form or scalar_form)[0]
    if "masked_attention" in pick:  # F.scaled_dot_product_attention: a mask decides
        masked = kwargs.get("attn_mask") is not None or len(args) > 3 and args[3] is not None
        return "masked_attention" if masked else "scaled_dot_product_attention"
    if {"max", "maximum"} <= pick or {"min", "minimum"} <= pick:
        binary = len(tensors) >= 2
        return next(c for c in candidates if c.endswith("imum") == binary)
    return candidates[0]


@dataclass
class Problem:
    level: int
    name: str
    ops: list[str] = field(default_factory=list)  # vocabulary operators, in call order (deduplicated)
    uncovered: list[str] = field(default_factory=list)  # compute calls outside the vocabulary
    layout: list[str] = field(default_factory=list)  # data movement calls
    error: str = ""

    @property
    def covered(self) -> bool:
        return not self.uncovered and not self.error


def _call_name(func) -> str:
    owner = getattr(func, "__objclass__", None) or getattr(func, "__self__", None)
    name = getattr(func, "__name__", repr(func))
    if owner is not None and getattr(owner, "__name__", "") == "TensorBase" or name.startswith("__"):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", None) or ""
    return f"{module}.{name}" if module else name


def trace(code: str, index: Index) -> tuple[list[str], list[str], list[str]]:
    """(vocabulary ops, uncovered calls, data-movement calls) of one KernelBench problem."""
    import torch
    from torch.overrides import TorchFunctionMode

    ops, uncovered, layout = [], [], []
    depth = [0]
    movement = {id(obj) for obj in map(_resolve, DATA_MOVEMENT_FUNCTIONS) if obj is not None}

    def builtin(module) -> bool:
        return type(module).__module__.startswith("torch.nn")

    def pre(module, args):
        if builtin(module):
            if depth[0] == 0:
                name = index.modules.get(type(module))
                (ops.append(name) if name else uncovered.append(f"nn.{type(module).__name__}"))
            depth[0] += 1

    def post(module, args, out):
        if builtin(module):
            depth[0] -= 1

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if depth[0] == 0:
                name = getattr(func, "__name__", "")
                candidates = index.functions.get(id(func)) or (index.methods.get(name) if _is_method(func) else None)
                if candidates:
                    ops.append(choose(candidates, args, kwargs))
                elif id(func) in movement or name in DATA_MOVEMENT_METHODS:
                    layout.append(_call_name(func))
                elif name not in _IGNORED:
                    uncovered.append(_call_name(func))
            return func(*args, **kwargs)

    namespace: dict = {}
    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(pre),
             torch.nn.modules.module.register_module_forward_hook(post)]
    try:
        with torch.device("meta"):
            exec(compile(code, "<kernelbench>", "exec"), namespace)  # noqa: S102 - benchmark sources
            model = namespace["Model"](*namespace["get_init_inputs"]())
            inputs = namespace["get_inputs"]()
            with Recorder():
                model(*inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return list(dict.fromkeys(ops)), list(dict.fromkeys(uncovered)), list(dict.fromkeys(layout))


def _is_method(func) -> bool:
    """A Tensor method (C descriptor, or a Python wrapper defined in torch/_tensor.py)."""
    return (getattr(func, "__objclass__", None) is not None or getattr(func, "__module__", "") == "torch._tensor"
            or type(func).__name__ in ("method_descriptor", "wrapper_descriptor", "getset_descriptor"))


def kernelbench(root: Path = DEFAULT_KERNELBENCH, levels=(1, 2)) -> list[Problem]:
    index = Index.build()
    problems = []
    for level in levels:
        for line in (root / f"level{level}.jsonl").read_text().splitlines():
            record = json.loads(line)
            problem = Problem(level, record["name"])
            try:
                problem.ops, problem.uncovered, problem.layout = trace(record["code"], index)
            except Exception as exc:  # noqa: BLE001 - report, do not stop
                problem.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
            problems.append(problem)
    return problems


# -- the document ---------------------------------------------------------------------------


def _forms(op) -> str:
    forms = []
    if op.has_module:
        forms.append(", ".join(f"`{m.replace('torch.nn.', 'nn.')}`" for m in op.module_types))
    forms += [f"`{f.replace('torch.nn.functional.', 'F.')}`" for f in op.torch_functions
              if not f.startswith(("operator.", "torch._C"))]
    forms += [f"`x.{m}()`" for m in op.tensor_methods if not m.startswith("__")]
    symbols = {"operator.add": "+", "operator.sub": "-", "operator.mul": "*", "operator.truediv": "/",
               "operator.matmul": "@"}
    forms += [f"`{symbols[f]}`" for f in op.torch_functions if f in symbols]
    if not op.has_module:
        forms += [f"`{m.replace('torch.nn.', 'nn.')}`" for m in op.module_types]
    return ", ".join(dict.fromkeys(forms))


def _attrs(op) -> str:
    parts = [spec.describe() for spec in op.attrs]
    parts += [f"{p.name} (solved{', per spatial dim' if p.per_spatial else ''})" for p in op.params]
    return "; ".join(parts) or "-"


def vocabulary_table() -> str:
    lines = ["| # | name | category | arity | PyTorch forms | attributes (sampled) and sizes (solved) | description |",
             "|---|---|---|---|---|---|---|"]
    for i, op in enumerate(VOCABULARY.values(), 1):
        lines.append(f"| {i} | `{op.name}` | {op.category} | {op.arity} | {_forms(op)} | {_attrs(op)} | "
                     f"{op.description} |")
    return "\n".join(lines)


def render(problems: list[Problem] | None) -> str:
    counts = Counter(op.category for op in VOCABULARY.values())
    out = [
        "# The operator vocabulary", "",
        "<!-- Generated by `python -m drtriton.ops.coverage > docs/vocabulary.md`; do not edit by hand. -->", "",
        f"{len(VOCABULARY)} primitive PyTorch operators, defined once in `drtriton/ops/` "
        f"(`drtriton.ops.VOCABULARY`). By category: "
        + ", ".join(f"{cat} {counts[cat]}" for cat in CATEGORIES) + ".", "",
        "Operators with weights appear in module form in generated programs (`self.conv2d_0 = nn.Conv2d(...)`), "
        "the others in functional form. Attributes are drawn before sizing; sizes marked *solved* are chosen by "
        "CP-SAT. Layout glue (`flatten`, `unsqueeze`, `.float()`) is not part of the vocabulary.", "",
        vocabulary_table(), "",
    ]
    if problems is None:
        return "\n".join(out)
    out += ["## KernelBench Level 1 and 2 coverage", "",
            "Measured by tracing every problem (see `drtriton/ops/coverage.py`). A problem is *covered* when "
            "every compute call it makes is a vocabulary operator; data movement (views, `cat`, indexing) "
            "does not count.", ""]
    for level in (1, 2):
        mine = [p for p in problems if p.level == level]
        used = Counter(op for p in mine for op in p.ops)
        missing = Counter(call for p in mine for call in p.uncovered)
        out += [f"### Level {level}: {sum(p.covered for p in mine)} of {len(mine)} problems covered", "",
                f"Vocabulary operators used: {len(used)} "
                f"({', '.join(f'`{name}` {n}' for name, n in used.most_common())}).", "",
                "Compute calls outside the vocabulary (problems using them): "
                + (", ".join(f"`{call}` {n}" for call, n in missing.most_common()) or "none") + ".", "",
                "| problem | vocabulary operators | not covered | data movement |", "|---|---|---|---|"]
        for p in mine:
            miss = p.error or ", ".join(f"`{c}`" for c in p.uncovered) or "-"
            out.append(f"| {p.name} | {', '.join(p.ops) or '-'} | {miss} | {', '.join(p.layout) or '-'} |")
        out.append("")
    unused = [name for name in VOCABULARY if not any(name in p.ops for p in problems)]
    out += ["### Vocabulary operators no Level 1/2 problem uses", "", ", ".join(f"`{n}`" for n in unused) or "none", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Print docs/vocabulary.md")
    parser.add_argument("--kernelbench", type=Path, default=DEFAULT_KERNELBENCH,
                        help="directory with level1.jsonl and level2.jsonl")
    args = parser.parse_args(argv)
    import warnings

    warnings.simplefilter("ignore")
    sys.stdout.write(render(kernelbench(args.kernelbench)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
