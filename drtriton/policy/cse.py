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


def _key(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False)


def _candidate(node: ast.AST) -> bool:
    """Worth a name: an operation on a runtime value (not a constant or a constexpr-only
    expression such as `BLOCK // 2`), without effects."""
    if not isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare, ast.Subscript)):
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, (ast.Constant, ast.Name)):
        return False
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    if not any(n not in _STATIC and not n.isupper() for n in names):
        return False
    return not any(isinstance(n, _OPAQUE) for n in ast.walk(node)) and not _calls(node, _EFFECTS)


def _calls(node: ast.AST, kinds: tuple[str, ...]) -> bool:
    return any(isinstance(n, ast.Call) and any(k in ast.unparse(n.func) for k in kinds) for n in ast.walk(node))


def _count(node: ast.AST, counts: dict[str, int]) -> None:
    if isinstance(node, _OPAQUE):
        return
    if _candidate(node):
        counts[_key(node)] = counts.get(_key(node), 0) + 1
    for child in ast.iter_child_nodes(node):
        _count(child, counts)


def _split(stmt: ast.stmt, taken: set[str]) -> list[ast.stmt] | None:
    """[definitions..., the statement using them], or None when nothing repeats."""
    value = getattr(stmt, "value", None)
    if value is None or _calls(value, _ORDERED):
        return None
    counts: dict[str, int] = {}
    _count(value, counts)
    repeated = {k for k, c in counts.items() if c >= 2}
    if not repeated:
        return None
    target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
    stem = target.id if isinstance(target, ast.Name) else "_t"
    names: dict[str, str] = {}  # subexpression -> placeholder (not an identifier: cannot clash)
    definitions: list[tuple[str, ast.expr]] = []

    def rewrite(node: ast.AST) -> ast.AST:
        key = _key(node) if isinstance(node, ast.expr) else None
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
