"""Static checks on a candidate's syntax tree, before any of it runs.

They catch the cheats that are plain in the source (reward-hacks.md rows 1, 2, 7, 8, 9, 10, 13)
and give the model a precise reason. They are the first of several layers: what slips past them
(code built at run time, say) meets the worker's audit hook, launch hooks, dispatch accounting
and the comparison done in another process.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..names import dotted_name

# Modules a candidate may not import, with the reason shown to the user or the model.
_BANNED_MODULES = {
    "triton.runtime.cache": "Triton's compiled-kernel cache is the verifier's (shared by every check)",
    "triton.compiler": "Triton compiles the kernels itself",
    "triton.knobs": "Triton's process-wide settings",
    "os": "process and file-system access",
    "sys": "interpreter internals",
    "subprocess": "subprocesses",
    "socket": "network access",
    "ssl": "network access",
    "http": "network access",
    "urllib": "network access",
    "requests": "network access",
    "threading": "threads (work could finish after the timer stops)",
    "_thread": "threads (work could finish after the timer stops)",
    "multiprocessing": "subprocesses",
    "concurrent": "threads or subprocesses",
    "asyncio": "concurrency outside the timed region",
    "ctypes": "native code outside Triton",
    "cffi": "native code outside Triton",
    "gc": "reaching other objects in the process (e.g. the reference's outputs)",
    "inspect": "reaching the verifier's frames",
    "importlib": "dynamic imports",
    "builtins": "patching builtins",
    "pickle": "arbitrary code in data",
    "marshal": "arbitrary code in data",
    "shutil": "file-system writes",
    "tempfile": "file-system writes",
    "pathlib": "file-system access",
    "io": "file access",
    "signal": "signal handling",
    "time": "timers (the verifier owns timing)",
    "timeit": "timers (the verifier owns timing)",
    "resource": "process limits",
    "mmap": "raw memory access",
    "types": "building functions or code at run time",
    "atexit": "code after the check",
    "numpy": "host-side compute that is neither Triton nor visible to the verifier",
    "cupy": "compute outside Triton",
    "numba": "compute outside Triton",
    "jax": "compute outside Triton",
    "torch.multiprocessing": "subprocesses",
    "torch.utils.cpp_extension": "native code outside Triton",
    "torch._C": "PyTorch internals",
    "torch._dynamo": "torch.compile does the work",
    "torch._inductor": "torch.compile does the work",
    "torch.fx": "graph rewriting of PyTorch code",
    "torch.jit": "TorchScript does the work",
    "torch.export": "graph export of PyTorch code",
    "torch.library": "registering operators",
    "torch.utils._python_dispatch": "intercepting PyTorch's dispatcher",
    "torch.cuda.graphs": "CUDA graphs replay recorded work",
    "torch.cuda.jiterator": "compute outside Triton",
    "torch.testing": "comparison functions are the verifier's",
    "torch.profiler": "the profiler is the verifier's",
}

_BANNED_CALLS = {
    "open": "file access",
    "exec": "running code built at run time",
    "eval": "running code built at run time",
    "compile": "running code built at run time",
    "__import__": "dynamic imports",
    "globals": "reaching module state",
    "locals": "reaching frame state",
    "vars": "reaching object internals",
    "breakpoint": "debugger",
    "input": "reading stdin",
    "delattr": "patching",
}

_BANNED_ATTRIBUTES = {
    "__dict__", "__class__", "__subclasses__", "__globals__", "__code__", "__builtins__",
    "__bases__", "__mro__", "__closure__", "__getattribute__", "__setattr__", "__delattr__",
    "f_back", "f_globals", "f_locals", "gi_frame", "_getframe", "__reduce__", "__reduce_ex__",
    "__torch_function__", "__torch_dispatch__", "_make_subclass", "as_subclass",
    "tolist", "numpy", "_C",
    # Triton's launch internals past the point where the verifier records launches
    "_run", "launcher_cls", "_bench", "_init_handles",
}

# torch.<dotted> uses that are banned wherever they appear (prefix match on the resolved name).
_BANNED_TORCH = {
    "torch.compile": "torch.compile does the work",
    "torch.cuda.Stream": "side streams (work could finish after the timer stops)",
    "torch.cuda.stream": "side streams (work could finish after the timer stops)",
    "torch.cuda.set_stream": "side streams (work could finish after the timer stops)",
    "torch.cuda.ExternalStream": "side streams (work could finish after the timer stops)",
    "torch.cuda.Event": "timing events are the verifier's",
    "torch.cuda.CUDAGraph": "CUDA graphs replay recorded work",
    "torch.cuda.graph": "CUDA graphs replay recorded work",
    "torch.cuda.make_graphed_callables": "CUDA graphs replay recorded work",
    "torch.cuda.set_per_process_memory_fraction": "memory limits are the verifier's",
    "torch.Stream": "side streams",
    "torch.Event": "timing events are the verifier's",
    "torch.manual_seed": "the verifier owns the random state",
    "torch.seed": "the verifier owns the random state",
    "torch.random": "the verifier owns the random state",
    "torch.set_rng_state": "the verifier owns the random state",
    "torch.cuda.manual_seed": "the verifier owns the random state",
    "torch.cuda.manual_seed_all": "the verifier owns the random state",
    "torch.set_float32_matmul_precision": "changes the precision of the whole process",
    "torch.set_default_dtype": "changes the precision of the whole process",
    "torch.set_flush_denormal": "changes the arithmetic of the whole process",
    "torch.allclose": "comparison functions are the verifier's",
    "torch.isclose": "comparison functions are the verifier's",
    "torch.equal": "comparison functions are the verifier's",
    "torch.Tensor._make_subclass": "tensor subclasses",
    "operator.attrgetter": "attributes reached by computed names",
    "operator.methodcaller": "attributes reached by computed names",
}

_TRITON_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}
_SIXTEEN_BIT = {
    "tl.float16", "tl.bfloat16", "tl.float8e4nv", "tl.float8e5", "tl.float8e4b15",
    "triton.language.float16", "triton.language.bfloat16",
    "torch.float16", "torch.half", "torch.bfloat16",
}
_FP32_DOT_PRECISIONS = {"ieee", "tf32x3"}


def _sixteen_bit_dtype(name: str) -> str | None:
    """The torch dtype a 16-bit name stands for (None for the float8 kinds)."""
    if name.endswith("bfloat16"):
        return "torch.bfloat16"
    return "torch.float16" if name.endswith(("float16", "half")) else None


@dataclass
class Finding:
    line: int
    message: str
    dtype: str | None = None  # a reduced-precision finding's dtype ("torch.float16"); None: a TF32 dot

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass
class StaticReport:
    errors: list[Finding] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)  # names of @triton.jit functions
    # Precision lowered below fp32 (16-bit casts, TF32 dots): disqualifying in an fp32 problem,
    # but for a 16-bit dtype the problem itself takes or returns (`x.half()`).
    reduced_precision: list[Finding] = field(default_factory=list)
    candidate_class: str | None = None

    @property
    def ok(self) -> bool:
        return not self.errors


def statements(source: str) -> frozenset[str]:
    """A source's whole units, as `ast.dump` gives them: each function or method (a constructor)
    and each top-level statement. What `check_source` takes as the problem's own code: a unit,
    not a single line inside one, so the names a line uses are bound as the user bound them.
    Empty where it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    units = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return frozenset(ast.dump(n) for n in units + tree.body)


class _Checker(ast.NodeVisitor):
    def __init__(self, reference_class: str | None, own: frozenset[str] = frozenset()):
        self.reference_class = reference_class
        self.own = own  # the problem's statements (`statements`)
        self.aliases: dict[str, str] = {}  # local name -> dotted module or object path
        self.report = StaticReport()
        self.classes: dict[str, ast.ClassDef] = {}
        self._called: set[int] = set()  # ids of the Name nodes that are called (getattr(...) is fine)
        self._within: list[ast.stmt] = []  # the statements being visited, outermost first

    def error(self, node: ast.AST, message: str) -> None:
        self.report.errors.append(Finding(getattr(node, "lineno", 0), message))

    def visit(self, node: ast.AST):
        if not isinstance(node, ast.stmt):
            return super().visit(node)
        self._within.append(node)
        try:
            return super().visit(node)
        finally:
            self._within.pop()

    def _problem_s_own(self) -> bool:
        """Whether the node being visited lies in a statement the problem's source has verbatim
        (its constructor, copied into the candidate so the module is a drop-in replacement):
        code the reference runs too, so a computed getattr or a setattr there reaches nothing
        the user did not write. The name checks still apply to it."""
        return any(ast.dump(n) in self.own for n in self._within)

    # -- names ---------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        """`tl.dot` -> `triton.language.dot` style full names, via the file's imports."""
        name = dotted_name(node)
        if not name:
            return None
        root, _, rest = name.partition(".")
        root = self.aliases.get(root, root)
        return f"{root}.{rest}" if rest else root

    def display(self, node: ast.AST) -> str:
        try:
            return ast.unparse(node)
        except Exception:  # pragma: no cover - unparse handles every parsed node
            return "?"

    # -- imports -------------------------------------------------------------------------
    def _check_module(self, node: ast.AST, module: str) -> None:
        for banned, why in _BANNED_MODULES.items():
            if module == banned or module.startswith(banned + "."):
                self.error(node, f"imports {module}: not allowed in a candidate ({why})")
                return

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(node, a.name)
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                root = a.name.split(".")[0]
                self.aliases[root] = root

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.error(node, "relative import: a candidate must be a single standalone file")
        self._check_module(node, module)
        for a in node.names:
            if a.name == "*":
                self.error(node, f"`from {module} import *` hides what the candidate uses")
                continue
            full = f"{module}.{a.name}"
            self._check_module(node, full)
            self.aliases[a.asname or a.name] = full

    # -- definitions ---------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes[node.name] = node
        if self.reference_class and node.name == self.reference_class:
            self.error(node, f"redefines the reference class {node.name}")
        for base in node.bases:
            full = self.resolve(base) or ""
            if full in ("torch.Tensor", "torch._tensor.Tensor") or full.endswith(".Tensor"):
                self.error(node, f"class {node.name} subclasses torch.Tensor (lazy or fake outputs)")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        decorators = [self.resolve(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
        if any(d == "triton.jit" for d in decorators):
            self.report.kernels.append(node.name)
        elif any(d in _TRITON_DECORATORS for d in decorators):
            self.error(node, f"{node.name} is autotuned but not decorated with @triton.jit")
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.error(node, f"defines {node.name}: intercepting PyTorch is not allowed")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    # -- statements ----------------------------------------------------------------------
    def visit_Try(self, node: ast.AST) -> None:
        self.error(node, "try/except can hide a failing kernel behind a fallback; let errors surface")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            expr = item.context_expr
            name = self.resolve(expr.func if isinstance(expr, ast.Call) else expr) or ""
            if name.endswith("suppress"):
                self.error(node, "contextlib.suppress can hide a failing kernel")
        self.generic_visit(node)

    def _check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t, node)
            return
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            root = target
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.aliases:
                self.error(node, f"assigns to {self.display(target)}: patching imported modules is not allowed")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    # -- expressions ---------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("getattr", "hasattr") and id(node) not in self._called and node.id not in self.aliases:
            self.error(node, f"passes {node.id} around: not allowed (it reaches attributes by computed names)")
        if self.reference_class and node.id == self.reference_class and isinstance(node.ctx, ast.Load):
            self.error(node, f"uses the reference class {node.id}; the candidate must compute on its own")
        if node.id == "__builtins__":
            self.error(node, "uses __builtins__")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _BANNED_ATTRIBUTES:
            self.error(node, f"uses .{node.attr}: not allowed in a candidate")
        full = self.resolve(node)
        if full:
            self._check_full_name(node, full)
        self.generic_visit(node)

    def _check_full_name(self, node: ast.AST, full: str) -> None:
        for banned, why in _BANNED_TORCH.items():
            if full == banned or full.startswith(banned + "."):
                self.error(node, f"uses {full}: not allowed ({why})")
                return
        for banned, why in _BANNED_MODULES.items():
            if full.startswith(banned + ".") and banned.startswith(("torch.", "triton.")):
                self.error(node, f"uses {full}: not allowed ({why})")
                return
        if full in _SIXTEEN_BIT:
            self.report.reduced_precision.append(Finding(node.lineno, f"uses {full}", _sixteen_bit_dtype(full)))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        self._called.add(id(func))
        if isinstance(func, ast.Name):
            full = self.aliases.get(func.id)
            if func.id in _BANNED_CALLS and full is None:
                self.error(node, f"calls {func.id}(): not allowed ({_BANNED_CALLS[func.id]})")
            if func.id == "setattr" and full is None:
                target = node.args[0] if node.args else None
                if not (isinstance(target, ast.Name) and target.id == "self") and not self._problem_s_own():
                    self.error(node, "setattr() on anything but self is patching")
            if func.id in ("getattr", "hasattr") and full is None and len(node.args) >= 2:
                self._check_getattr(node, node.args[0], node.args[1])
            if func.id == "type" and len(node.args) == 3:
                self.error(node, "builds a class at run time with type()")
            if full:
                self._check_full_name(node, full)
        if isinstance(func, ast.Attribute) and func.attr in ("half", "bfloat16"):
            self.report.reduced_precision.append(Finding(node.lineno, f"calls .{func.attr}()",
                                                         _sixteen_bit_dtype(func.attr)))
        name = self.resolve(func) or ""
        if name in ("triton.language.dot", "tl.dot") or name.endswith("language.dot"):
            self._check_dot(node)
        self.generic_visit(node)

    def _check_getattr(self, node: ast.Call, obj: ast.AST, name: ast.AST) -> None:
        """`getattr(obj, "name")` is checked as `obj.name`; a computed name (on anything but
        self) could reach what no attribute check sees (`getattr(torch, "_" + "C")`)."""
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            if not (isinstance(obj, ast.Name) and obj.id == "self") and not self._problem_s_own():
                self.error(node, f"getattr on {self.display(obj)} with a computed name: not allowed "
                                 "(it hides what the candidate uses)")
            return
        if name.value in _BANNED_ATTRIBUTES:
            self.error(node, f"uses .{name.value}: not allowed in a candidate")
        base = self.resolve(obj)
        if base:
            self._check_full_name(node, f"{base}.{name.value}")

    def _check_dot(self, node: ast.Call) -> None:
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        precision = kw.get("input_precision")
        if precision is None and len(node.args) > 3:
            precision = node.args[3]
        allow_tf32 = kw.get("allow_tf32")
        if isinstance(precision, ast.Constant) and precision.value in _FP32_DOT_PRECISIONS:
            return
        if isinstance(allow_tf32, ast.Constant) and allow_tf32.value is False and precision is None:
            return
        what = (
            f"input_precision={ast.unparse(precision)}"
            if precision is not None
            else "no input_precision (Triton's default for fp32 is TF32)"
        )
        self.report.reduced_precision.append(
            Finding(node.lineno, f"tl.dot with {what}; fp32 needs input_precision=\"ieee\" or \"tf32x3\"")
        )


def check_source(
    source: str, candidate_classes: list[str], reference_class: str | None = None, problem_source: str = ""
) -> StaticReport:
    """Check a candidate source. `candidate_classes` are the accepted names of the module class
    (e.g. ["ModelNew"] or ["MyBlockTriton", "ModelNew"]); `reference_class` may not be used.
    Statements the candidate has verbatim from `problem_source` may set and read attributes by
    computed names (a constructor's `getattr(nn, activation)()`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return StaticReport(errors=[Finding(e.lineno or 0, f"syntax error: {e.msg}")])
    checker = _Checker(reference_class, statements(problem_source))
    checker.visit(tree)
    report = checker.report
    top_classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    report.candidate_class = next((c for c in candidate_classes if c in top_classes), None)
    if report.candidate_class is None:
        report.errors.insert(
            0, Finding(0, f"defines no candidate class (expected {' or '.join(candidate_classes)})")
        )
    if not report.kernels:
        report.errors.append(Finding(0, "defines no @triton.jit kernel"))
    return report
