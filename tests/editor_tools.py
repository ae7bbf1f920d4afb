"""What the real-editor tests (test_editors_*.py) share: finding the tools that
`scripts/install-editors.sh` installed, and where screenshots and records go.

In CI (`CI` set to true, or `DRTRITON_REQUIRE_EDITORS=1` as `.ci/run` sets) a missing tool
fails the test: CI installs them, so their absence is a broken install, not a reason to skip.
Elsewhere the test skips and says how to install them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL_BLOCK = ROOT / "editors" / "testdata" / "small_block.py"
INSTALL = "bash scripts/install-editors.sh (inside the project's virtual environment)"


def in_ci() -> bool:
    return (os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
            or os.environ.get("DRTRITON_REQUIRE_EDITORS") == "1")


def unavailable(reason: str) -> None:
    """Fail in CI, skip elsewhere; either way with the reason and the fix."""
    text = f"{reason}; install the editor tools with: {INSTALL}"
    if in_ci():
        pytest.fail(text, pytrace=False)
    pytest.skip(text)


def tools_file() -> Path:
    if os.environ.get("DRTRITON_EDITOR_TOOLS"):
        return Path(os.environ["DRTRITON_EDITOR_TOOLS"])
    cache = Path(os.environ.get("DRTRITON_CI_CACHE", Path.home() / ".cache" / "drtriton-ci"))
    return cache / "editor-tools.json"


def recorded(name: str) -> str | None:
    """One tool from the install script's record, or None."""
    path = tools_file()
    return json.loads(path.read_text()).get(name) if path.is_file() else None


def tools(*names: str) -> dict[str, str]:
    """The named tools from the install script's record, each checked to exist."""
    path = tools_file()
    if not path.is_file():
        unavailable(f"no record of the editor tools at {path}")
    recorded = json.loads(path.read_text())
    found = {}
    for name in names:
        value = recorded.get(name)
        if not value or not Path(value).exists():
            unavailable(f"{name} is not installed (the record at {path} says {value!r})")
        found[name] = value
    return found


def artifacts(name: str) -> Path:
    """A clean folder for one test's screenshots and records, kept after the run:
    test-artifacts/<name> in the repository (or under $DRTRITON_TEST_ARTIFACTS)."""
    base = Path(os.environ.get("DRTRITON_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    folder = base / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (from /proc), children first."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, pp in parent.items() if pp in frontier]
        found += children
        frontier = children
    return found


def broken_python(folder: Path) -> Path:
    """An interpreter as a half-upgraded environment leaves it: this Python, with a pygls that is
    found on disk but fails to import (so the language server cannot start, and doctor says why)."""
    shim = folder / "broken-site" / "pygls"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("pygls is broken on purpose")\n')
    python = folder / "broken-python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{shim.parent}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python
