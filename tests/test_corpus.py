"""The development corpus (`corpus/`, issue #15): modules nobody on this team wrote, built in code
with random weights. Every file of corpus/torch and corpus/transformers converts on CPU at its
"small" size through the command line, exactly as a user runs it (mixed mode, Triton
interpreter); every file of corpus/torchvision is a well-formed problem file (torchvision itself
is not needed for that: loading works on syntax trees only)."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from drtriton.problem import load_file

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus"
CONVERTED = sorted((CORPUS / "torch").glob("*.py")) + sorted((CORPUS / "transformers").glob("*.py"))
TORCHVISION = sorted((CORPUS / "torchvision").glob("*.py"))
BUDGET_S = 120


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _first_failure(record: dict) -> str:
    for c in record.get("candidates", []):
        verdict = c.get("verdict") or {}
        if not verdict.get("correct"):
            return f"{c.get('fragment')}: {(verdict.get('reasons') or ['?'])[0]}"
    return "no candidate failed"


@pytest.mark.slow
@pytest.mark.parametrize("path", CONVERTED, ids=_id)
def test_corpus_file_converts(path, tmp_path):
    out = tmp_path / f"{path.stem}_triton.py"
    r = subprocess.run([sys.executable, "-m", "drtriton.cli", "convert", str(path), "--mode", "mixed",
                        "--device", "cpu", "--budget", str(BUDGET_S), "--json", "--out", str(out)],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode in (0, 1), f"exit code {r.returncode}\n{r.stderr[-4000:]}"
    assert "Traceback (most recent call last)" not in r.stderr, r.stderr[-4000:]
    record = json.loads(r.stdout)
    assert record["correct"], f"{record.get('reason')} | first failing candidate: {_first_failure(record)}"
    assert record["output"] == str(out) and out.is_file()


def _layout(path: Path) -> None:
    """One-line docstring on top, and the size switch read at module level."""
    source = path.read_text()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree)
    assert doc and "\n" not in doc.strip(), f"{path}: needs a one-line module docstring"
    assert re.search(r'^SIZE = "small"', source, re.M), f"{path}: the size switch, SIZE = \"small\""
    assert '"small"' in source and '"full"' in source


@pytest.mark.parametrize("path", TORCHVISION, ids=_id)
def test_torchvision_file_is_a_problem(path):
    problem = load_file(path)
    assert problem.class_name == "Model"
    assert problem.inputs_fn == "get_inputs" and problem.init_inputs_fn == "get_init_inputs"
    assert "torchvision.models." in problem.source
    _layout(path)


@pytest.mark.parametrize("path", CONVERTED, ids=_id)
def test_corpus_file_is_a_problem(path):
    problem = load_file(path)
    assert problem.class_name == "Model"
    assert problem.inputs_fn == "get_inputs" and problem.init_inputs_fn == "get_init_inputs"
    _layout(path)


def test_corpus_is_there():
    assert len(list((CORPUS / "torch").glob("*.py"))) >= 25
    assert len(list((CORPUS / "transformers").glob("*.py"))) >= 6
    assert len(TORCHVISION) >= 20
