"""Assembling a candidate: a standalone module file that is a drop-in replacement.

The new class keeps the original constructor (its methods other than `forward` are copied, with
the class renamed), so it takes the same arguments and has the same `state_dict` keys; only
`forward` is generated. The file carries the module-level helpers and constants the constructor
needs, the Triton kernels, and nothing else of the user's file.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import io
import keyword
import re
import textwrap
import tokenize
from pathlib import Path

from ..ops import HELPERS, called_helpers
from ..problem import Problem, defined_names, extract_standalone
from .cse import name_common_subexpressions
from .emit import bound_tuning
from .emit.gather import cat_rows
from .emit.matmul import aligned_rows, split_k
from .per_shape import keep, per_shape

HEADER = """import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
"""

# Host-side helpers, each added when forward calls it. triton.cdiv and triton.next_power_of_2 are
# constexpr functions: called from Python they unwrap their arguments through two list
# comprehensions, a few us per launch.
HOST_HELPERS = {
    "_cdiv": "def _cdiv(a, b):\n    return -(-a // b)",
    "_next_pow2": "def _next_pow2(n):\n    return 1 << (n - 1).bit_length() if n > 1 else 1",
    # programs that can all be resident at once (a grid barrier waits for every one): one per SM
    "_sm_count": "def _sm_count(device):\n    if device.type != \"cuda\":\n        return 1\n"
                 "    return torch.cuda.get_device_properties(device).multi_processor_count",
    # a product's batch strides: t's last `n` batch dims, right-aligned; 0 where t broadcasts
    "_batch_strides": "def _batch_strides(t, n):\n    lead = t.dim() - 2\n"
                      "    return [t.stride(d) if d >= 0 and t.shape[d] > 1 else 0 for d in range(lead - n, lead)]",
}
# the emitters' host decisions (the matrix product's, the copying cat's view of an input) and the
# values kept per input shape (per_shape.py), defined and tested once there
for _fn in (split_k, aligned_rows, cat_rows, per_shape, keep):
    HOST_HELPERS["_" + _fn.__name__] = re.sub(r"^def \w+", f"def _{_fn.__name__}", inspect.getsource(_fn)).strip()



def _class_source(path: Path, name: str) -> str:
    """A class's source read from its file (importing policy/launch.py would load torch)."""
    text = path.read_text()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == name)
    return ast.get_source_segment(text, node)


# the launcher every launched kernel is wrapped in (policy/launch.py says why), defined once
DIRECT_LAUNCH = re.sub(r"\bDirectLaunch\b", "_DirectLaunch",
                       _class_source(Path(__file__).with_name("launch.py"), "DirectLaunch"))


def launched_kernels(kernels: list[str], forward_lines: list[str]) -> list[str]:
    """The names of the kernels `forward` launches (`name[grid](...)`), in order; a function
    only other kernels call is not one of them."""
    text = "\n".join(forward_lines)
    names = [_single_kernel(kernel) for kernel in kernels]
    return [n for n in names if n is not None and re.search(r"\b" + re.escape(n) + r"\[", text)]


def direct_launches(names: list[str]) -> str:
    """The end of a module: `_DirectLaunch` and each launched kernel wrapped in it (after the
    kernels and the class, which a reader looks for first; forward finds them at call time)."""
    wraps = "\n".join(f"{n} = _DirectLaunch({n})" for n in names)
    return f"{DIRECT_LAUNCH}\n\n\n# the kernels forward launches, each through _DirectLaunch\n{wraps}"


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name):
        if node.id == self.old:
            node.id = self.new
        return node

    def visit_Call(self, node: ast.Call):
        # super(Old, self).__init__() -> super().__init__()
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
            node.args = []
        return node


def _class(problem: Problem) -> ast.ClassDef:
    tree = ast.parse(problem.source)
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == problem.class_name)


def _forward(problem: Problem) -> ast.FunctionDef:
    fwd = next((n for n in _class(problem).body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if fwd is None:
        raise ValueError(f"{problem.class_name} has no forward method")
    return fwd


def forward_signature(problem: Problem) -> str:
    fwd = _forward(problem)
    fwd.args.posonlyargs = [a for a in fwd.args.posonlyargs]
    for a in fwd.args.args + fwd.args.posonlyargs + fwd.args.kwonlyargs:
        a.annotation = None
    return ast.unparse(fwd.args)


def vararg_bindings(problem: Problem, forward_lines: list[str]) -> list[str]:
    """forward(self, x, *rest): torch.export names the tuple's tensors rest_0, rest_1, ... (a
    list inside it rest_0_0, ...); the forward lines use those names, bound here from the tuple
    (only those used, and none that is one of forward's own parameters)."""
    fwd = _forward(problem)
    if fwd.args.vararg is None:
        return []
    rest = fwd.args.vararg.arg
    own = {a.arg for a in fwd.args.posonlyargs + fwd.args.args + fwd.args.kwonlyargs}
    used = {m.group(0) for line in forward_lines for m in re.finditer(rf"\b{re.escape(rest)}(?:_\d+)+\b", line)}
    return [f"{name} = {rest}" + "".join(f"[{i}]" for i in name[len(rest) + 1:].split("_"))
            for name in sorted(used - own)]


def class_body(problem: Problem, new_name: str) -> tuple[list[str], set[str]]:
    """The original class body without forward, renamed; and the module-level names it uses."""
    cls = _class(problem)
    parts, used = [], set()
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "forward":
            continue
        if isinstance(stmt, ast.Expr) and isinstance(getattr(stmt, "value", None), ast.Constant):
            continue  # the docstring: ours replaces it
        stmt = _Rename(problem.class_name, new_name).visit(stmt)
        used |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        parts.append(ast.unparse(stmt))
    bases = ", ".join(ast.unparse(b) for b in cls.bases)
    used |= {n.id for b in cls.bases for n in ast.walk(b) if isinstance(n, ast.Name)}
    return [f"class {new_name}({bases}):"] + [textwrap.indent(p, "    ") for p in parts], used


# kept as they are, not numbered: a kernel calling one helper is not another calling another
_KEPT = set(keyword.kwlist) | set(dir(builtins)) | {"tl", "triton", "math"} | set(HELPERS)


def _shape_of(kernel: str, name: str) -> tuple:
    """The kernel's tokens with its own names (parameters, locals, the kernel's) numbered in
    order of appearance and comments dropped: two kernels with the same shape are the same
    kernel under other names (launches pass arguments by position)."""
    numbering: dict[str, str] = {name: "K"}
    out, after_dot = [], False
    for tok in tokenize.generate_tokens(io.StringIO(kernel).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL):
            continue
        text = tok.string
        if tok.type == tokenize.NAME and not after_dot and text not in _KEPT and not text.isupper():
            text = numbering.setdefault(text, f"v{len(numbering)}")
        after_dot = tok.type == tokenize.OP and tok.string == "."
        out.append(text)
    return tuple(out)


def _single_kernel(chunk: str) -> str | None:
    """The name of the one function `chunk` defines, when that is all it holds (a template's
    kernel); None for anything else (a model-written fragment: imports, classes, an instance)."""
    try:
        body = ast.parse(chunk).body
    except SyntaxError:
        return None
    return body[0].name if len(body) == 1 and isinstance(body[0], ast.FunctionDef) else None


def share_kernels(kernels: list[str], lines: list[str]) -> tuple[list[str], list[str]]:
    """Keep one copy of kernels that differ only in names (the repeated blocks of a network),
    and launch it wherever the others were: Triton then compiles and tunes it once."""
    kept, seen, rename = [], {}, {}
    for kernel in kernels:
        name = _single_kernel(kernel)
        if name is None:
            kept.append(kernel)
            continue
        try:
            shape = _shape_of(kernel, name)
        except (tokenize.TokenError, IndentationError):
            kept.append(kernel)
            continue
        if shape in seen:
            rename[name] = seen[shape]
        else:
            seen[shape] = name
            kept.append(kernel)
    if not rename:
        return kernels, lines
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, rename)) + r")\b")
    return kept, [pattern.sub(lambda m: rename[m.group(1)], line) for line in lines]


_CHAIN = re.compile(r"\bself((?:\.[A-Za-z_]\w*|\[-?\d+\])+)")
_SEGMENT = re.compile(r"\.[A-Za-z_]\w*|\[-?\d+\]")
_ASSIGNED = re.compile(r"\s*(?:[-+*/%@&|^]|//|\*\*|<<|>>)?=(?!=)")  # `self.x = ...`, `+=`: a target


def hoist_module_paths(lines: list[str]) -> list[str]:
    """Looks each shared module path up once per call: `self.model.stage2[0].branch1[1].weight`
    and `...branch1[1].bias` become `_path3.weight` and `_path3.bias` after `_path3 =
    self.model.stage2[0].branch1[1]` at the top; a buffer two kernels read, `self.cos_cached`,
    becomes one local. (`nn.Sequential[i]` walks the container on
    every lookup: a network's forward spent a millisecond per call in them.) A path is hoisted
    where uses branch: used at least twice, and not always through the same longer path. Text
    in string literals and comments is left as it is."""
    text = "\n".join(lines)
    literal = _literal_spans(text)
    chains = [m for m in _CHAIN.finditer(text) if not any(a <= m.start() < b for a, b in literal)]
    assigned = {tuple(_SEGMENT.findall(m.group(1))) for m in chains if _ASSIGNED.match(text, m.end())}
    counts: dict[tuple, int] = {}
    for m in chains:
        segments = tuple(_SEGMENT.findall(m.group(1)))
        # whole paths too (a buffer two kernels read), unless forward assigns to one
        for j in range(1, len(segments) + (segments not in assigned)):
            counts[segments[:j]] = counts.get(segments[:j], 0) + 1
    hoisted = sorted((p for p, c in counts.items() if c >= 2 and
                      not any(len(q) == len(p) + 1 and q[:-1] == p and counts[q] == c for q in counts)),
                     key=len)
    if not hoisted:
        return lines
    names: dict[tuple, str] = {}
    head = ["# module paths, looked up once per call"]
    for i, path in enumerate(hoisted):
        base = max((q for q in names if path[:len(q)] == q), key=len, default=())
        names[path] = f"_path{i}"
        head.append(f"_path{i} = {names.get(base, 'self')}{''.join(path[len(base):])}")

    def shorten(m: re.Match) -> str:
        segments = tuple(_SEGMENT.findall(m.group(1)))
        base = max((q for q in names if len(q) <= len(segments) and segments[:len(q)] == q), key=len, default=())
        return names[base] + "".join(segments[len(base):]) if base else m.group(0)

    out, end = [], 0
    for m in chains:
        out += [text[end:m.start()], shorten(m)]
        end = m.end()
    return head + "".join(out + [text[end:]]).split("\n")


def _literal_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges of the string literals and comments of `text` (none if it does not
    tokenize: then every chain counts, as before)."""
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    spans = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.STRING, tokenize.COMMENT):
                spans.append((starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1]))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return spans


def assemble(problem: Problem, kernels: list[str], forward_lines: list[str], outputs: list[str],
             description: str, direct_launch: bool = True) -> str:
    new_name = problem.candidate_class
    kernels = [name_common_subexpressions(k) for k in kernels]
    kernels, forward_lines = share_kernels(kernels, forward_lines)
    forward_lines = vararg_bindings(problem, forward_lines) + hoist_module_paths(forward_lines)
    kernels = bound_tuning(kernels)
    launched = launched_kernels(kernels, forward_lines) if direct_launch else []
    head, used = class_body(problem, new_name)
    tree = ast.parse(problem.source)
    # the file's own imports (aliases too: `import torch as th`), helpers and constants
    defined = set().union(*(defined_names(n) for n in tree.body))
    excluded = {problem.class_name, problem.inputs_fn, problem.init_inputs_fn or ""}
    roots = sorted((defined & used) - excluded)
    support = ""
    if roots:
        support = extract_standalone(problem.source, roots)
        # drop imports the header already has and anything that defines the reference class
        support = "\n".join(line for line in support.splitlines()
                            if line.strip() not in HEADER.splitlines())
    ret = outputs[0] if len(outputs) == 1 else "(" + ", ".join(outputs) + ",)"
    forward = [f"    def forward({forward_signature(problem)}):"] + \
              [f"        {line}" for line in forward_lines] + [f"        return {ret}"]
    docstring = f'    """{description}"""'
    body = head[:1] + [docstring] + head[1:] + [""] + forward
    helpers = "\n\n\n".join(src for name, src in HOST_HELPERS.items()
                             if any(f"{name}(" in line for line in forward_lines))
    # device functions the kernels' elementwise templates call (a recurrence's loop), each once
    device = [name_common_subexpressions(src) for src in called_helpers("\n".join(kernels))]
    code = [support.strip(), helpers, "\n\n".join(device + kernels), "\n".join(body),
            direct_launches(launched) if launched else ""]
    parts = [f'"""{new_name}: {problem.name} in Triton, generated by DRTriton\'s built-in policy."""',
             _header("\n".join(code)), *code]
    return "\n\n\n".join(p for p in parts if p) + "\n"


def _header(code: str) -> str:
    """HEADER without the imports `code` does not use (math, operator, F)."""
    optional = {"import math": "math.", "import operator": "operator.", "import torch.nn.functional as F": "F."}
    lines = [line for line in HEADER.splitlines()
             if line not in optional or re.search(r"\b" + re.escape(optional[line]), code)]
    return re.sub(r"\n\n+", "\n\n", "\n".join(lines).strip())
