"""Policies by name: what `--policy` (CLI) and the `drtriton.policy` setting (editor) select.

The built-in policy always takes part unless switched off; a model-backed policy adds its own
candidates, which compete with the built-in ones in the search.
"""

from __future__ import annotations

POLICIES = ("builtin",)


def model_policies(name: str, endpoint: str | None = None, model: str | None = None,
                   device: str = "cpu") -> list:
    """The model-backed policies for a `--policy` name (none for `builtin`)."""
    if name == "builtin":
        return []
    raise ValueError(f"unknown policy {name!r}; choose from: {', '.join(POLICIES)}")
