"""Problems: a module to convert, plus how to build it and feed it.

A problem is plain data: a standalone Python source (imports, the helpers and constants the class
needs, the class, `get_inputs` and `get_init_inputs`) and the name of the class in it. Loading
works on syntax trees only and never runs user code: the code runs later, inside a worker process
(`drtriton.verify`), where a broken `get_inputs` becomes a `ProblemError` that says what to fix.

Sources: a KernelBench file (`class Model`, `get_inputs`, `get_init_inputs`), any user file with a
class name, and KernelBench JSONL data (one object a line with `name` and `code`).
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

INPUTS_FN = "get_inputs"
INIT_INPUTS_FN = "get_init_inputs"
_MODULE_BASES = {"Module"}  # nn.Module, torch.nn.Module, or `from torch.nn import Module`


class ProblemError(ValueError):
    """The problem itself cannot be built or fed; the message says what to add or fix."""


@dataclass(frozen=True)
class Problem:
    name: str
    source: str  # standalone module source that defines `class_name`, inputs_fn, init_inputs_fn
    class_name: str
    inputs_fn: str = INPUTS_FN
    init_inputs_fn: str | None = INIT_INPUTS_FN  # None: the constructor takes no arguments
    origin: str = ""  # where it came from: a path, or "kernelbench:level2/17"
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        """Identity of what gets built: same key, same reference module and inputs."""
        h = hashlib.sha256()
        for part in (self.source, self.class_name, self.inputs_fn, self.init_inputs_fn or ""):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:16]

    @property
    def is_kernelbench(self) -> bool:
        return self.class_name == "Model"

    @property
    def candidate_class(self) -> str:
        """The class a converted module defines: KernelBench's `ModelNew`, else `<Class>Triton`."""
        return "ModelNew" if self.is_kernelbench else f"{self.class_name}Triton"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "class_name": self.class_name,
            "inputs_fn": self.inputs_fn,
            "init_inputs_fn": self.init_inputs_fn,
            "origin": self.origin,
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Problem":
        return cls(**d)


# --------------------------------------------------------------------------------------------
# Syntax-tree helpers


def module_classes(tree: ast.Module) -> list[str]:
    """Names of the top-level classes that are nn.Module subclasses, directly or via local bases."""
    local = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    memo: dict[str, bool] = {}

    def is_module(name: str, seen: frozenset = frozenset()) -> bool:
        if name in memo:
            return memo[name]
        node = local.get(name)
        if node is None or name in seen:
            return False
        result = False
        for base in node.bases:
            base_name = _dotted_tail(base)
            if base_name in _MODULE_BASES or is_module(base_name, seen | {name}):
                result = True
        memo[name] = result
        return result

    return [name for name in local if is_module(name)]


def _outermost(tree: ast.Module, classes: list[str]) -> list[str]:
    """The module classes no other module class in the file uses (by name)."""
    used: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in classes:
            used |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id != node.name}
    return [c for c in classes if c not in used]


def _dotted_tail(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def defined_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = set()
        for t in targets:
            names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        return names
    return set()


#: what `_used_names` and `_registered` call the operator namespace `torch.ops.<namespace>`
_OPS = "torch.ops."


def _used_names(stmt: ast.stmt) -> set[str]:
    """The names `stmt` reads, and each operator namespace it calls through (`torch.ops.<namespace>`,
    as `_OPS` + the namespace): importing the library of that name registers its operators."""
    names = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            names.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "ops" \
                and isinstance(n.value.value, ast.Name) and n.value.value.id == "torch":
            names.add(_OPS + n.attr)
    return names


def _registered(stmt: ast.stmt) -> set[str]:
    """The operator namespaces an import may register (`_OPS` + its package's name): transformers'
    `grouped_mm_fallback` exists once `transformers.integrations.moe` is imported, a name no code reads."""
    if isinstance(stmt, ast.Import):
        return {_OPS + a.name.split(".")[0] for a in stmt.names}
    if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
        return {_OPS + stmt.module.split(".")[0]}
    return set()


def _is_main_guard(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test)


def extract_standalone(source: str, roots: list[str]) -> str:
    """The part of `source` that `roots` need: their definitions plus, transitively, the imports,
    helpers and constants they use. Other top-level statements (scripts, training loops,
    `if __name__ == "__main__":`) are dropped, so building the problem runs nothing else."""
    tree = ast.parse(source)
    stmts = [s for s in tree.body if not _is_main_guard(s)]
    defines = [defined_names(s) | _registered(s) for s in stmts]
    needed_names = set(roots)
    keep: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, s in enumerate(stmts):
            if i in keep:
                continue
            if isinstance(s, ast.ImportFrom) and s.module == "__future__":
                keep.add(i)
                changed = True
            elif defines[i] & needed_names:
                keep.add(i)
                needed_names |= _used_names(s)
                changed = True
    lines = source.splitlines()
    parts = []
    for i in sorted(keep):
        s = stmts[i]
        start = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
        parts.append("\n".join(lines[start - 1 : s.end_lineno]))
    return "\n\n".join(parts) + "\n"


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _method_params(cls: ast.ClassDef, method: str) -> tuple[list[str], int] | None:
    """(parameter names without self, number of required ones) of a method, or None if absent."""
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == method:
            args = node.args
            positional = [a.arg for a in args.posonlyargs + args.args][1:]
            required = len(positional) - len(args.defaults)
            return positional, max(required, 0)
    return None


def _class_node(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise KeyError(name)


def example_inputs_hint(cls: ast.ClassDef) -> str:
    """The code a user should add so the problem can be built and fed (used in error messages)."""
    fwd = _method_params(cls, "forward") or ([], 0)
    init = _method_params(cls, "__init__") or ([], 0)
    fwd_args = ", ".join(fwd[0]) or "..."
    tensors = ", ".join("torch.rand(...)" for _ in fwd[0])
    init_args = ", ".join(init[0])
    return (
        f"def {INPUTS_FN}():\n"
        f"    # example arguments of {cls.name}.forward({fwd_args})\n"
        f"    return [{tensors}]\n\n"
        f"def {INIT_INPUTS_FN}():\n"
        f"    # arguments of {cls.name}({init_args})\n"
        f"    return [{', '.join('...' for _ in init[0])}]\n"
    )


# --------------------------------------------------------------------------------------------
# Loaders


def from_source(
    source: str, class_name: str | None = None, *, name: str | None = None, origin: str = ""
) -> Problem:
    """Build a problem from a Python source; `class_name` picks the module (default: `Model` in a
    KernelBench file, or the file's only nn.Module subclass)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ProblemError(f"{origin or 'source'}:{e.lineno}: syntax error: {e.msg}") from None
    classes = module_classes(tree)
    where = origin or "the source"
    if class_name is None:
        if "Model" in classes and _function(tree, INPUTS_FN):
            class_name = "Model"
        elif len(classes) == 1:
            class_name = classes[0]
        elif not classes:
            raise ProblemError(f"{where} defines no nn.Module subclass to convert")
        elif len(roots := _outermost(tree, classes)) == 1:
            class_name = roots[0]  # the network; the others are its blocks
        else:
            raise ProblemError(
                f"{where} defines several nn.Module classes ({', '.join(classes)}): "
                "name one with --class"
            )
    elif class_name not in classes:
        found = f"; it has {', '.join(classes)}" if classes else ""
        raise ProblemError(f"{where} has no nn.Module subclass named {class_name!r}{found}")
    cls = _class_node(tree, class_name)

    # A class-specific pair (get_inputs_<Class>) wins over the file's generic one, so a file with
    # several modules can feed each of them.
    inputs_fn = next(
        (f for f in (f"{INPUTS_FN}_{class_name}", INPUTS_FN) if _function(tree, f)), None
    )
    if inputs_fn is None:
        raise ProblemError(
            f"{where}: {class_name} cannot be checked without example inputs. Add a function "
            f"{INPUTS_FN}() returning the arguments of {class_name}.forward as a list, and "
            f"{INIT_INPUTS_FN}() returning the constructor's arguments, e.g.\n\n"
            + example_inputs_hint(cls)
        )
    init_fn: str | None = next(
        (f for f in (f"{INIT_INPUTS_FN}_{class_name}", INIT_INPUTS_FN) if _function(tree, f)), None
    )
    if init_fn is None:
        init = _method_params(cls, "__init__")
        if init and init[1] > 0:
            raise ProblemError(
                f"{where}: {class_name}.__init__ needs arguments ({', '.join(init[0][: init[1]])}) "
                f"but the file has no {INIT_INPUTS_FN}(). Add\n\n"
                f"def {INIT_INPUTS_FN}():\n    return [{', '.join('...' for _ in init[0][: init[1]])}]\n"
            )
    if _function(tree, inputs_fn).args.args:
        raise ProblemError(f"{where}: {inputs_fn}() must take no arguments")

    roots = [class_name, inputs_fn] + ([init_fn] if init_fn else [])
    standalone = extract_standalone(source, roots)
    return Problem(
        name=name or class_name,
        source=standalone,
        class_name=class_name,
        inputs_fn=inputs_fn,
        init_inputs_fn=init_fn,
        origin=origin,
    )


def load_file(path: str | Path, class_name: str | None = None) -> Problem:
    path = Path(path)
    try:
        source = path.read_text()
    except OSError as e:
        raise ProblemError(f"cannot read {path}: {e.strerror}") from None
    problem = from_source(source, class_name, origin=str(path))
    name = path.stem if problem.is_kernelbench else problem.class_name
    return Problem(**{**problem.to_dict(), "name": name})


# Problem sets shipped with the package, by name (KernelBench, MIT: see its LICENSE there)
KERNELBENCH_DIR = Path(__file__).parent / "data" / "kernelbench"
SHIPPED_SETS = {f"kernelbench:level{n}": KERNELBENCH_DIR / f"level{n}.jsonl" for n in (1, 2)}


def load_kernelbench(path: str | Path, ids: set[int] | None = None) -> list[Problem]:
    """KernelBench JSONL: one object a line with `name`, `code` and optionally `level`, `problem_id`."""
    problems = []
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ProblemError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ProblemError(f"{path}: not a text file") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            code, name = row["code"], row["name"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ProblemError(f"{path}:{lineno}: not a KernelBench row ({e})") from None
        pid = row.get("problem_id")
        if ids is not None and pid not in ids:
            continue
        origin = f"kernelbench:level{row.get('level', '?')}/{pid}"
        p = from_source(code, "Model", name=name, origin=origin)
        problems.append(Problem(**{**p.to_dict(), "meta": {k: row[k] for k in ("level", "problem_id") if k in row}}))
    return problems


def load_problems(spec: str | Path) -> list[Problem]:
    """A set of problems: a shipped set by name (`kernelbench:level2`), a KernelBench JSONL
    file, a folder of problem files, or one file."""
    if isinstance(spec, str) and spec.startswith("kernelbench:"):
        if spec not in SHIPPED_SETS:
            raise ProblemError(f"{spec}: no such problem set (shipped: {', '.join(SHIPPED_SETS)})")
        return load_kernelbench(SHIPPED_SETS[spec])
    path = Path(spec)
    if path.suffix == ".jsonl":
        return load_kernelbench(path)
    if path.is_dir():
        files = sorted(path.glob("*.py"))
        if not files:
            raise ProblemError(f"{path} holds no .py problem files")
        return [load_file(f) for f in files]
    if path.is_file():
        return [load_file(path)]
    raise ProblemError(f"{path}: no such file or folder")
