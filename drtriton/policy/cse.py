"""Common subexpressions of a generated kernel, named once.

Operator templates are expression strings composed by substitution, so a template that uses its
argument several times (atan uses |x| a dozen times, and halves the angle twice) repeats whole
subtrees: an arctangent came out as 34 KB of one expression. The compiler folds the repeats again,
but the kernel is unreadable, slow to parse and thousands of tokens for a model to learn. Like
Inductor's CSE, each repeated subexpression of a statement becomes one local, defined just before
the statement that uses it, in dependency order; a subexpression used once stays inline.
"""

from __future__ import annotations

import ast
import builtins

from ..names import dotted_name

# calls that act: never named; a statement with one other than a store is left alone (a repeated
# load after an atomic may read what the atomic wrote); a store's own arguments are evaluated first
_EFFECTS = ("store", "atomic", "print", "assert", "barrier")
_ORDERED = _EFFECTS[1:]
# not runtime values: a name of these alone keeps an expression constexpr (`min(BLOCK, 32)`,
# `float("-inf")`), and a local assigned such an expression would become a tensor
_STATIC = set(dir(builtins)) | {"tl", "triton", "math"}
# expressions that may not evaluate every part (a constexpr branch may be invalid on the other side)
_OPAQUE = (ast.IfExp, ast.Lambda, ast.BoolOp, ast.NamedExpr, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp, ast.Await, ast.Yield, ast.YieldFrom)
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)


def name_common_subexpressions(kernel: str) -> str:
    """`kernel` (one function's source) with each statement's repeated subexpressions named;
    the source as it is when there is nothing to name or it does not parse as one function."""
    try:
        tree = ast.parse(kernel)
    except SyntaxError:
        return kernel
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return kernel
    function = tree.body[0]
    taken = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | {a.arg for a in function.args.args}
    lines = kernel.split("\n")
    edits = []
    for stmt in _statements(function.body):
        if not _whole_lines(stmt, lines):
            continue
        new = _split(stmt, taken)
        if new is not None:
            indent = lines[stmt.lineno - 1][:stmt.col_offset]
            edits.append((stmt.lineno, stmt.end_lineno, [indent + ast.unparse(s) for s in new]))
    for start, end, new_lines in sorted(edits, reverse=True):
        lines[start - 1:end] = new_lines
    return "\n".join(lines)


def _statements(body: list[ast.stmt]):
    for stmt in body:
        if isinstance(stmt, _SIMPLE):
            yield stmt
        for field in ("body", "orelse"):  # if / for / while / with blocks
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                yield from _statements(inner)


def _whole_lines(stmt: ast.stmt, lines: list[str]) -> bool:
    """The statement alone on its lines (not `a = 1; b = 2`), so its lines can be replaced."""
    before = lines[stmt.lineno - 1][:stmt.col_offset]
    after = lines[stmt.end_lineno - 1][stmt.end_col_offset:].strip()
    return not before.strip() and (not after or after.startswith("#"))


def _shapes(root: ast.AST) -> dict[int, tuple[int, bool]]:
    """id(node) -> (its structure, worth a name) for every node under `root`, in one bottom-up
    pass: equal subtrees get the same small int (comparing `ast.dump`s of every node instead took
    seconds on a 100 KB kernel, on the path of every candidate). Worth a name: an operation on a
    runtime value (not a constant or a constexpr-only expression such as `BLOCK // 2`), with no
    effect and no part that may go unevaluated."""
    structures: dict[tuple, int] = {}
    facts: dict[int, tuple[int, bool]] = {}

    def visit(node: ast.AST) -> tuple[int, bool, bool]:  # structure, reads a runtime value, clean
        parts, runtime, clean = [type(node).__name__], False, not isinstance(node, _OPAQUE)
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            if not any(isinstance(c, ast.AST) for c in children):
                parts.append((field, repr(value)))
                continue
            seen = [visit(c) if isinstance(c, ast.AST) else (repr(c), False, True) for c in children]
            parts.append((field, tuple(x[0] for x in seen)))
            runtime = runtime or any(x[1] for x in seen)
            clean = clean and all(x[2] for x in seen)
        if isinstance(node, ast.Name):
            runtime = node.id not in _STATIC and not node.id.isupper()
        if _calls_kind(node, _EFFECTS):
            clean = False
        structure = structures.setdefault(tuple(parts), len(structures))
        operation = isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare, ast.Subscript)) and not (
            isinstance(node, ast.UnaryOp) and isinstance(node.operand, (ast.Constant, ast.Name)))
        facts[id(node)] = (structure, operation and runtime and clean)
        return structure, runtime, clean

    visit(root)
    return facts


def _calls_kind(node: ast.AST, kinds: tuple[str, ...]) -> bool:
    """`node` is a call whose callee's name contains one of `kinds` (`tl.atomic_add`: "atomic")."""
    return isinstance(node, ast.Call) and any(k in dotted_name(node.func, partial=True) for k in kinds)


def _calls(node: ast.AST, kinds: tuple[str, ...]) -> bool:
    return any(_calls_kind(n, kinds) for n in ast.walk(node))


def _count(node: ast.AST, facts: dict[int, tuple[int, bool]], counts: dict[int, int]) -> None:
    if isinstance(node, _OPAQUE):
        return
    structure, worth = facts[id(node)]
    if worth:
        counts[structure] = counts.get(structure, 0) + 1
    for child in ast.iter_child_nodes(node):
        _count(child, facts, counts)


def _split(stmt: ast.stmt, taken: set[str]) -> list[ast.stmt] | None:
    """[definitions..., the statement using them], or None when nothing repeats."""
    value = getattr(stmt, "value", None)
    if value is None or _calls(value, _ORDERED):
        return None
    facts = _shapes(value)
    counts: dict[int, int] = {}
    _count(value, facts, counts)
    repeated = {k for k, c in counts.items() if c >= 2}
    if not repeated:
        return None
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
    stem = target.id if isinstance(target, ast.Name) else "_t"
    names: dict[int, str] = {}  # subexpression -> placeholder (not an identifier: cannot clash)
    definitions: list[tuple[str, ast.expr]] = []

    def rewrite(node: ast.AST) -> ast.AST:
        key = facts[id(node)][0]  # the node's structure before its children are rewritten
        if key in names:
            return ast.Name(names[key], ast.Load())
        if not isinstance(node, _OPAQUE):
            for field, old in ast.iter_fields(node):
                if isinstance(old, list):
                    setattr(node, field, [rewrite(x) if isinstance(x, ast.AST) else x for x in old])
                elif isinstance(old, ast.AST):
                    setattr(node, field, rewrite(old))
        if key in repeated:
            names[key] = f"<{len(names)}>"
            definitions.append((names[key], node))
            return ast.Name(names[key], ast.Load())
        return node

    stmt.value = rewrite(value)
    definitions, stmt = _inline_single_uses(definitions, stmt)
    if not definitions:
        return None
    # the names that stay, numbered in order
    for placeholder, _ in list(definitions):
        i = 0
        while f"{stem}_{i}" in taken:
            i += 1
        taken.add(f"{stem}_{i}")
        final = ast.Name(f"{stem}_{i}", ast.Load())
        definitions = [(final.id if n == placeholder else n, _substitute(e, placeholder, final))
                       for n, e in definitions]
        stmt = _substitute(stmt, placeholder, final)
    return [ast.Assign([ast.Name(n, ast.Store())], e, lineno=0) for n, e in definitions] + [stmt]


def _inline_single_uses(definitions: list[tuple[str, ast.expr]], stmt: ast.stmt):
    """A subexpression repeated only inside another repeated one is used once after that one is
    named: put it back inline."""
    while True:
        uses: dict[str, int] = {}
        for node in [e for _, e in definitions] + [stmt]:
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    uses[n.id] = uses.get(n.id, 0) + 1
        once = next(((n, e) for n, e in definitions if uses.get(n, 0) <= 1), None)
        if once is None:
            return definitions, stmt
        name, expr = once
        definitions = [(n, _substitute(e, name, expr)) for n, e in definitions if n != name]
        stmt = _substitute(stmt, name, expr)


def _substitute(node: ast.AST, name: str, expr: ast.expr) -> ast.AST:
    class Inline(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name):
            return expr if n.id == name and isinstance(n.ctx, ast.Load) else n

    return Inline().visit(node)
