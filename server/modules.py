"""Finding the `nn.Module` classes of a Python document, fast enough for every cursor move.

A document is cut into top-level chunks at lines that start, in column 0, with `class`, `def`,
`async def` or a decorator. Each chunk is parsed on its own and cached by its text, so after an
edit only the chunk that changed is parsed again (a 3,000-line file parses in 40-100 ms whole,
a chunk in well under 1 ms). A cut can only fall inside a triple-quoted string by mistake; the
chunk then fails with "unterminated triple-quoted string" and is merged with the next one, which
is what Python itself would read. Other syntax errors are kept per chunk: the rest of the file
is still indexed.

Module classes are found from the syntax tree: bases that resolve to `torch.nn.Module` through
the file's imports and assignments (`nn.Module`, `torch.nn.Module`, `from torch.nn import Module
as M`, `Base = nn.Module`), plus subclasses of local module classes, transitively.

Lines and columns here are 0-based and count code points (what Python strings index); the
server converts them to the client's position encoding.
"""

from __future__ import annotations

import ast
import bisect
import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field

from drtriton.names import dotted_name

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_WITH_BREAK = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_CUT = re.compile(r"(?:class|def|async\s+def)\b|@")
TORCH_MODULE = "torch.nn.Module"
_MODULE_SPELLINGS = {"nn.Module", "Module", "torch.nn.Module"}  # accepted even when unresolved


def split_lines(text: str) -> list[str]:
    """Lines as LSP counts them (\\n, \\r\\n and \\r end a line), without their line breaks.
    A text ending with a line break has an empty last line, like an editor shows it."""
    return _LINE_BREAK.split(text)


@dataclass(frozen=True)
class ClassInfo:
    """A top-level class, as found in its chunk (lines already shifted to document lines)."""

    name: str
    start: int  # first line, decorators included
    end: int  # last line of the body
    name_line: int
    name_col: int  # code points
    bases: tuple[str, ...]  # dotted spellings, "" for anything else (calls, subscripts)
    methods: frozenset[str]
    text_hash: str  # of the class's lines: changes when the class is edited
    node: ast.ClassDef = field(compare=False, repr=False)  # lines relative to its chunk
    line_offset: int = 0  # add to node line numbers to get document lines (1-based -> +offset)


@dataclass(frozen=True)
class ModuleClass:
    """An nn.Module subclass of the document."""

    info: ClassInfo
    has_forward: bool  # its own, or inherited from a local class

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def start(self) -> int:
        return self.info.start

    @property
    def end(self) -> int:
        return self.info.end


@dataclass
class _Chunk:
    classes: list[ClassInfo]
    functions: list[str]
    aliases: dict[str, str]  # name -> dotted target (imports, `X = a.b` assignments)
    bound: set[str]  # every top-level name bound
    error: tuple[int, int, str] | None  # (line, col, message), lines relative to the chunk
    imports: list[tuple[int, bool]] = field(default_factory=list)  # (line, is __future__)


@dataclass
class DocumentIndex:
    lines: list[str]
    classes: list[ClassInfo]  # every top-level class, in order
    modules: list[ModuleClass]  # the nn.Module subclasses, in order
    functions: set[str]
    aliases: dict[str, str]
    bound: set[str]
    syntax_error: tuple[int, int, str] | None  # the first one: (line, col, message)
    imports: list[tuple[int, bool]] = field(default_factory=list)  # top-level imports: (line, is __future__)
    _starts: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self):
        self._starts = [m.start for m in self.modules]
        self.by_name = {m.name: m for m in self.modules}

    def module(self, name: str) -> ModuleClass | None:
        return self.by_name.get(name)

    def module_at(self, line: int) -> ModuleClass | None:
        i = bisect.bisect_right(self._starts, line) - 1
        if i >= 0 and self.modules[i].start <= line <= self.modules[i].end:
            return self.modules[i]
        return None

    def modules_in(self, first: int, last: int) -> list[ModuleClass]:
        """The module classes that lines first..last touch."""
        lo = max(bisect.bisect_right(self._starts, first) - 1, 0)
        out = []
        for m in self.modules[lo:]:
            if m.start > last:
                break
            if m.end >= first:
                out.append(m)
        return out

    def has_inputs(self, name: str) -> bool:
        """Whether `from_source` will find example inputs for class `name`."""
        return f"get_inputs_{name}" in self.functions or "get_inputs" in self.functions


# --------------------------------------------------------------------------------------------
# Chunks


def _cuts(lines: list[str]) -> list[int]:
    """Line numbers where a top-level definition (with its decorators) starts."""
    cuts = [0]
    in_decorators = False
    for i, line in enumerate(lines):
        if not line or line[0] in " \t#":
            continue
        m = _CUT.match(line)
        if m is None:
            if line[0] not in ")]}":  # a multi-line decorator's closing bracket
                in_decorators = False
            continue
        if m.group(0) == "@":
            if not in_decorators:
                cuts.append(i)
            in_decorators = True
        else:
            if not in_decorators:
                cuts.append(i)
            in_decorators = False
    return sorted(set(cuts))


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _analyse(tree: ast.Module, lines: list[str]) -> _Chunk:
    classes, functions, aliases, bound, imports = [], [], {}, set(), []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append((node.lineno - 1, isinstance(node, ast.ImportFrom) and node.module == "__future__"))
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            end = (node.end_lineno or node.lineno) - 1
            header = lines[node.lineno - 1]
            m = re.search(r"\bclass\s+" + re.escape(node.name) + r"\b", header)
            col = m.end() - len(node.name) if m else 0
            methods = frozenset(n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            classes.append(ClassInfo(node.name, start, end, node.lineno - 1, col,
                                     tuple(dotted_name(b) for b in node.bases), methods,
                                     _hash("\n".join(lines[start:end + 1])), node))
            bound.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node.name)
            bound.add(node.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                    bound.add(a.asname)
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
                    bound.add(top)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                name = a.asname or a.name
                bound.add(name)
                if node.module and not node.level and a.name != "*":
                    aliases[name] = f"{node.module}.{a.name}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                bound |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            value = getattr(node, "value", None)
            if value is not None and len(targets) == 1 and isinstance(targets[0], ast.Name):
                d = dotted_name(value)
                if d:
                    aliases[targets[0].id] = d
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            # names bound in guarded blocks (try: import x except ImportError: ...)
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    for a in sub.names:
                        bound.add((a.asname or a.name).split(".")[0])
                elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    bound.add(sub.id)
    return _Chunk(classes, functions, aliases, bound, None, imports)


_MERGEABLE = ("unterminated triple-quoted string", "was never closed", "unexpected EOF")


class ModuleIndexer:
    """Indexes documents; keeps parsed chunks (by text) and whole indexes (by uri and version)."""

    def __init__(self, max_chunks: int = 20000):
        self._chunks: OrderedDict[str, _Chunk] = OrderedDict()
        self._max_chunks = max_chunks
        self._docs: dict[str, tuple[object, DocumentIndex]] = {}

    def index(self, text: str, uri: str | None = None, version: object = None) -> DocumentIndex:
        if uri is not None and version is not None:
            cached = self._docs.get(uri)
            if cached is not None and cached[0] == version:
                return cached[1]
        idx = self._build(text)
        if uri is not None and version is not None:
            self._docs[uri] = (version, idx)
        return idx

    def forget(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def _chunk(self, text: str, lines: list[str]) -> _Chunk:
        hit = self._chunks.get(text)
        if hit is not None:
            self._chunks.move_to_end(text)
            return hit
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            chunk = _Chunk([], [], {}, set(), ((e.lineno or 1) - 1, max((e.offset or 1) - 1, 0), e.msg))
        except (ValueError, RecursionError, MemoryError) as e:  # null bytes, absurd nesting
            chunk = _Chunk([], [], {}, set(), (0, 0, str(e)))
        else:
            chunk = _analyse(tree, lines)
        self._chunks[text] = chunk
        if len(self._chunks) > self._max_chunks:
            self._chunks.popitem(last=False)
        return chunk

    def _build(self, text: str) -> DocumentIndex:
        lines = split_lines(text)
        cuts = _cuts(lines) + [len(lines)]
        classes: list[ClassInfo] = []
        functions: set[str] = set()
        aliases: dict[str, str] = {}
        bound: set[str] = set()
        imports: list[tuple[int, bool]] = []
        error = None
        i = 0
        while i < len(cuts) - 1:
            start, j = cuts[i], i + 1
            while True:
                end = cuts[j]
                chunk_lines = lines[start:end]
                chunk = self._chunk("\n".join(chunk_lines), chunk_lines)
                if chunk.error and j < len(cuts) - 1 and any(s in chunk.error[2] for s in _MERGEABLE):
                    j += 1  # the cut fell inside a string or brackets: read on, as Python would
                    continue
                break
            for c in chunk.classes:
                classes.append(ClassInfo(c.name, c.start + start, c.end + start, c.name_line + start,
                                         c.name_col, c.bases, c.methods, c.text_hash, c.node, start))
            functions.update(chunk.functions)
            aliases.update(chunk.aliases)
            bound |= chunk.bound
            imports += [(line + start, future) for line, future in chunk.imports]
            if chunk.error and error is None:
                error = (chunk.error[0] + start, chunk.error[1], chunk.error[2])
            i = j
        return DocumentIndex(lines, classes, _module_classes(classes, aliases), functions, aliases,
                             bound, error, imports)


def resolve(name: str, aliases: dict[str, str], depth: int = 0) -> str:
    """A dotted name through the file's imports and aliases: `nn.Module` -> `torch.nn.Module`."""
    if not name or depth > 8:
        return name
    head, _, rest = name.partition(".")
    target = aliases.get(head)
    if target is None or target == head:
        return name
    full = f"{target}.{rest}" if rest else target
    return resolve(full, aliases, depth + 1) if full.split(".")[0] != head else full


def is_torch_module(name: str, aliases: dict[str, str]) -> bool:
    """Whether a base spelled `name` is torch.nn.Module. Unresolved conventional spellings
    (`nn.Module`, `Module` after a star import) count too."""
    if not name:
        return False
    r = resolve(name, aliases)
    if r == TORCH_MODULE or (r.startswith("torch.nn.") and r.endswith(".Module")):
        return True
    return name in _MODULE_SPELLINGS and name.split(".")[0] not in aliases


def _module_classes(classes: list[ClassInfo], aliases: dict[str, str]) -> list[ModuleClass]:
    local = {}
    for c in classes:
        local[c.name] = c  # a redefinition wins, as at run time
    memo: dict[str, tuple[bool, bool]] = {}  # name -> (is module, has forward)

    def visit(name: str, seen: frozenset) -> tuple[bool, bool]:
        if name in memo:
            return memo[name]
        c = local.get(name)
        if c is None or name in seen:
            return (False, False)
        module, forward = False, "forward" in c.methods
        for base in c.bases:
            if is_torch_module(base, aliases):
                module = True
            elif base in local:
                m, f = visit(base, seen | {name})
                module |= m
                forward |= f and m
        memo[name] = (module, forward)
        return memo[name]

    out = []
    for c in classes:
        if local.get(c.name) is not c:
            continue
        module, forward = visit(c.name, frozenset())
        if module:
            out.append(ModuleClass(c, forward))
    return out


# --------------------------------------------------------------------------------------------
# Making a file's aliases readable to drtriton.problem


def normalize_for_problem(source: str, class_name: str) -> str:
    """`drtriton.problem` recognises a module base spelled `...Module` or a local module class.
    Rewrite the other spellings (`M` from `from torch.nn import Module as M`, `Base = nn.Module`)
    of the class's base and its local ancestors' to `torch.nn.Module`, importing torch if the
    file does not. Same meaning, same line count where torch is already imported."""
    tree = ast.parse(source)
    lines = _LINE_WITH_BREAK.findall(source)
    chunk = _analyse(tree, [line.rstrip("\r\n") for line in lines])
    aliases = chunk.aliases
    local = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    todo, seen, edits = [class_name], set(), []
    while todo:
        name = todo.pop()
        if name in seen or name not in local:
            continue
        seen.add(name)
        for base in local[name].bases:
            d = dotted_name(base)
            if d in local:
                todo.append(d)
            elif d and d.rsplit(".", 1)[-1] != "Module" and is_torch_module(d, aliases):
                edits.append(base)
    if not edits:
        return source
    for base in sorted(edits, key=lambda b: (b.lineno, b.col_offset), reverse=True):
        raw = lines[base.lineno - 1].encode("utf-8")
        assert base.end_lineno == base.lineno
        raw = raw[: base.col_offset] + TORCH_MODULE.encode() + raw[base.end_col_offset:]
        lines[base.lineno - 1] = raw.decode("utf-8")
    if "torch" not in chunk.bound or aliases.get("torch", "torch") != "torch":
        after = 0
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                after = node.end_lineno
            elif after == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                    and node is tree.body[0]:
                after = node.end_lineno  # the module docstring
        lines.insert(after, "import torch\n")
    return "".join(lines)
