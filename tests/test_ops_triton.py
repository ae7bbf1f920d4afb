"""Every elementwise operator's Triton template, run under the Triton interpreter, matches PyTorch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drtriton import ops

pytest.importorskip("triton")
SCRIPT = Path(__file__).with_name("triton_elementwise_check.py")


@pytest.fixture(scope="module")
def results():
    # a subprocess: TRITON_INTERPRET must be set before triton is first imported
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_every_elementwise_template_matches_pytorch(results):
    failures = [r for r in results if not r["ok"] and r["op"] != "naive_elu"]
    assert not failures, failures
    covered = {r["op"] for r in results}
    expected = {op.name for op in ops.VOCABULARY.values() if op.triton_template is not None}
    assert expected <= covered


def test_check_catches_a_naive_formula(results):
    """ELU written as exp(x) - 1 loses relative accuracy near zero: the check must notice."""
    (naive,) = [r for r in results if r["op"] == "naive_elu"]
    assert not naive["ok"]
