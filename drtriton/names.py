"""Dotted names in Python syntax trees: `tl.atomic_add` from the attribute chain that spells it.
One walk for every reader of code (the static checker, the kernels' CSE, the editor's module
finder)."""

from __future__ import annotations

import ast


def dotted_name(node: ast.AST, partial: bool = False) -> str:
    """`a.b.c` for an attribute chain rooted at a name; "" for any other root (`f().b`), or with
    `partial` the attributes that are names (`b`): what a check for a callee's kind needs."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif not partial:
        return ""
    return ".".join(reversed(parts))
