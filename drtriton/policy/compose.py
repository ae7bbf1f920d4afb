"""Fragments written by someone else (a model) inside an assembled module.

A model answers a fragment problem with a whole module file. To put it in a plan beside the
built-in policy's kernels, its top-level names (kernels, helpers, the class) get a prefix so
several fragments can share one file, and forward calls one module-level instance of its class
with the fragment's external values.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass
class Foreign:
    """A fragment's module from another policy: `source` defines `class_name`, whose forward
    takes the fragment's external values (`inputs`, parent value names) and returns its stored
    values (`outputs`)."""

    source: str
    class_name: str
    policy: str
    inputs: list[str]
    outputs: list[str]


class _Prefix(ast.NodeTransformer):
    def __init__(self, names: set[str], prefix: str):
        self.names, self.prefix = names, prefix

    def visit_Name(self, node: ast.Name):
        if node.id in self.names:
            node.id = self.prefix + node.id
        return node

    def _def(self, node):
        if node.name in self.names:
            node.name = self.prefix + node.name
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_ClassDef = visit_AsyncFunctionDef = _def


def _is_main_guard(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "__name__" in ast.unparse(stmt.test)


def embed(foreign: Foreign, prefix: str) -> tuple[str, str]:
    """(code to put at module level, the instance forward calls)."""
    tree = ast.parse(foreign.source)
    body = [s for s in tree.body if not _is_main_guard(s)]
    defined = set()
    for s in body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(s.name)
        elif isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    renamer = _Prefix(defined, prefix)
    parts = []
    for s in body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            parts.append(ast.unparse(s))
        else:
            parts.append(ast.unparse(renamer.visit(s)))
    instance = f"{prefix}module"
    parts.append(f"{instance} = {prefix}{foreign.class_name}()")
    header = f"# written by the {foreign.policy} policy for a fragment; its names carry the prefix {prefix}"
    return header + "\n" + "\n\n".join(parts), instance
