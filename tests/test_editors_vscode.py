"""The VS Code extension (editors/vscode) in a real VS Code: code-server with the packaged .vsix
installed, driven in Chromium with playwright-core, against the real language server on the CPU.

editors/vscode/test/e2e.js clicks through the light bulb's "Convert SmallBlock to Triton", watches
the output file fill, reads the Problems panel, the hover and the status bar, runs "DRTriton: Show
Report", saves the output, then kills the language server and watches the extension restart it.
It records what the window showed; this test asserts on that record and on the saved file.
Screenshots are kept in test-artifacts/vscode/. The tools come from scripts/install-editors.sh."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from editor_tools import ROOT, SMALL_BLOCK, artifacts, broken_python, descendants, free_port, tools

pytestmark = pytest.mark.slow
DRIVER = ROOT / "editors" / "vscode" / "test" / "e2e.js"
SCREENSHOTS = ["01-light-bulb", "02-streaming", "03-verdict", "04-hover", "05-report", "06-restarted",
               "07-broken-python"]

# the user's settings: a quiet window, no first-run pages, no network
USER_SETTINGS = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "chat.disableAIFeatures": True,
    "extensions.ignoreRecommendations": True,
    "extensions.autoCheckUpdates": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "git.enabled": False,
}


@pytest.fixture(scope="module")
def code_server(tmp_path_factory):
    """code-server with the extension installed and the workspace open; yields its address."""
    t = tools("node", "code_server", "chromium", "vsix")
    node, entry = t["node"], str(Path(t["code_server"]) / "out" / "node" / "entry.js")
    base = tmp_path_factory.mktemp("vscode")
    user_data, extensions, workspace = base / "user-data", base / "extensions", base / "workspace"
    (user_data / "User").mkdir(parents=True)
    (user_data / "User" / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=2))
    (workspace / ".vscode").mkdir(parents=True)
    shutil.copy(SMALL_BLOCK, workspace)
    # the extension's settings, as a user would write them: this Python, the CPU, a short search
    (workspace / ".vscode" / "settings.json").write_text(json.dumps({
        "drtriton.pythonPath": sys.executable,
        "drtriton.device": "cpu",
        "drtriton.searchBudgetSeconds": 60,
    }, indent=2))
    common = ["--user-data-dir", str(user_data), "--extensions-dir", str(extensions),
              "--config", str(base / "config.yaml")]

    install = subprocess.run([node, entry, *common, "--install-extension", t["vsix"]],
                             capture_output=True, text=True, timeout=120)
    assert "successfully installed" in install.stdout, install.stdout + install.stderr
    assert any(p.name.startswith("drtriton.drtriton-") for p in extensions.iterdir())

    port = free_port()
    log = open(base / "code-server.log", "w")
    server = subprocess.Popen(
        [node, entry, *common, "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
         "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override",
         str(workspace)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # its own group: stopped as one
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"code-server did not start:\n{(base / 'code-server.log').read_text()}")
                time.sleep(0.2)
        yield {"url": url, "pid": server.pid, "workspace": workspace, "node": node, "chromium": t["chromium"],
               "log": base / "code-server.log"}
    finally:
        _stop(server)
        log.close()


@pytest.fixture(scope="module")
def record(code_server, tmp_path_factory) -> dict:
    out = artifacts("vscode")
    env = {
        **os.environ,
        "DRTRITON_URL": code_server["url"],
        "DRTRITON_WORKSPACE": str(code_server["workspace"]),
        "DRTRITON_ARTIFACTS": str(out),
        "DRTRITON_CHROMIUM": code_server["chromium"],
        "DRTRITON_SERVER_PID": str(code_server["pid"]),
        "DRTRITON_TIMEOUT": "180",
        "DRTRITON_BROKEN_PYTHON": str(broken_python(tmp_path_factory.mktemp("broken"))),
    }
    try:
        run = subprocess.run([code_server["node"], str(DRIVER)], cwd=DRIVER.parent, env=env,
                             capture_output=True, text=True, timeout=480)
    finally:
        (out / "code-server.log").write_text(code_server["log"].read_text())
    (out / "driver.log").write_text(run.stdout + run.stderr)
    print(run.stdout)
    observations = out / "observations.json"
    assert observations.is_file(), f"no record from the driver (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    seen = json.loads(observations.read_text())
    assert run.returncode == 0, f"the driver failed (screenshot: {out / 'failure.png'}):\n{run.stdout}\n{run.stderr}"
    seen["artifacts"] = out
    seen["workspace"] = code_server["workspace"]
    return seen


def test_light_bulb_offers_the_conversion(record):
    assert "Convert SmallBlock to Triton" in record["lightBulbMenu"]


def test_output_file_streams_in_and_is_a_module(record):
    snapshots = record["outputSnapshots"]
    assert snapshots, "the output editor never showed text"
    assert snapshots[0]["text"].startswith('"""SmallBlockTriton')  # the module's first lines, as written
    assert "@triton.jit" in snapshots[-1]["text"] or "class SmallBlockTriton" in snapshots[-1]["text"]
    # Ctrl+F finds the class and a kernel in the editor; saved, the file holds the same module
    assert record["find"] == {"class SmallBlockTriton(nn.Module)": "1 of 1", "@triton.jit": "1 of 1"}
    saved = (record["workspace"] / "small_block_triton.py").read_text()
    assert saved.startswith(snapshots[0]["text"].split("\n")[0])
    assert "class SmallBlockTriton(nn.Module):" in saved
    compile(saved, "small_block_triton.py", "exec")


def test_verdict_in_problems_panel_and_notification(record):
    assert record["problem"].startswith("correct on 7/7 trials")
    assert "drtriton" in record["problem"] and "[Ln 7, Col 7]" in record["problem"]
    assert record["notification"].startswith("DRTriton: SmallBlock converted: small_block_triton.py")


def test_hover_shows_the_report(record):
    hover = record["hover"]
    assert "DRTriton: SmallBlock" in hover
    assert "correct on 7/7 trials" in hover and "Triton kernels: linear_relu_kernel" in hover


def test_status_bar_and_report_command(record):
    assert "1 running" in record["statusWhileRunning"]
    assert record["statusAfter"] == ("DRTriton: server running, 0 running, "
                                     "best SmallBlock: correct, speed not measured")
    assert record["reportTab"].startswith("Preview SmallBlock report.md")


def test_server_restarts_after_a_crash(record):
    assert "language server stopped unexpectedly; restarting it" in record["crashMessage"]
    assert record["restartedPids"]
    assert "server running" in record["statusRestarted"]


def test_an_interpreter_that_cannot_run_the_server_is_named_with_doctors_report(record):
    # drtriton.pythonPath set to a Python whose pygls does not import (the last step of the driver)
    message = record["brokenPythonMessage"]
    assert "broken-python" in message and "cannot run the language server" in message, message
    assert "ImportError: pygls is broken on purpose" in message, message
    output = record["brokenPythonOutput"]  # the DRTriton output, opened from the error's button
    [row] = [line for line in output if line.startswith("server (editors)")]
    assert "NOT USABLE: pygls: ImportError: pygls is broken on purpose" in row, output
    assert any(line.startswith("torch") for line in output), output  # the whole report, not one line


def test_screenshots_are_kept(record):
    for name in SCREENSHOTS:
        png = record["artifacts"] / f"{name}.png"
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def _stop(server: subprocess.Popen) -> None:
    """Stops code-server and everything it started: its process group, then whatever of it is
    left in process groups of their own (the verifier's workers under the language server)."""
    below = {pid: _cmdline(pid) for pid in descendants(server.pid)}
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    for pid, cmdline in below.items():
        if cmdline and _cmdline(pid) == cmdline:  # still the same process, not a reused id
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _cmdline(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
