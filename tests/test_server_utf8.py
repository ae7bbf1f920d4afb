"""The language server with a minimal client that negotiates UTF-8 positions (as Neovim does):
no `workspace/configuration` (settings come with `initializationOptions`), no work-done
progress, no resource operations in edits. Positions must count UTF-8 bytes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")  # the `test` extra; the server needs the `server` extra
pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig

from test_server import (Client, actions_at, apply_text_edits, client_factory, convert, diagnostics_for,
                         finished, line_of, open_file, small_module, wait_for, wait_for_log)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def utf8_client() -> Client:
    client = client_factory()
    client.encoding = "utf-8"
    return client


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "drtriton.server"], client_factory=utf8_client)

MINIMAL = types.ClientCapabilities(
    general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf8]),
    workspace=types.WorkspaceClientCapabilities(apply_edit=True),
)


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: Client, tmp_path_factory):
    root = tmp_path_factory.mktemp("utf8")
    lsp_client.root = root
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=MINIMAL, root_uri=from_fs_path(str(root)),
        initialization_options={"drtriton": {"device": "cpu", "searchBudgetSeconds": 120}}))
    assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
    await wait_for_log(lsp_client, "DRTriton ready", 120)
    yield
    await lsp_client.shutdown_session()


NAME = "Größe"  # 5 characters, 7 UTF-8 bytes


async def test_positions_count_utf8_bytes_and_the_output_is_exact(client: Client):
    source = small_module(NAME).replace('"""A tiny block to convert."""', '"""Ein kleiner Block 😋."""')
    source = source.replace("self.fc = nn.Linear(width, width)",
                            "self.fc = nn.Linear(width, width)\n        self.label = \"größe 😋\"")
    uri = open_file(client, "umlaut.py", source)
    row = line_of(source, f"class {NAME}")
    [action] = await actions_at(client, uri, row)
    assert action.title == f"Convert {NAME} to Triton"
    reply = await convert(client, uri, NAME)
    end = await finished(client, reply["job"])
    assert end["correct"], end
    out = client.files[reply["output"]]
    assert Path(reply["output"].replace("file://", "")).is_file()  # created on disk: no CreateFile here
    assert f"class {NAME}Triton(nn.Module):" in out and "self.label = 'größe 😋'" in out
    compile(out, "umlaut_triton.py", "exec")
    [diag] = await wait_for(lambda: diagnostics_for(client, uri, NAME), 10, "diagnostic")
    assert diag.range.start.character == 6
    assert diag.range.end.character == 6 + len(NAME.encode("utf-8"))


async def test_inputs_edit_lands_after_a_line_with_wide_characters(client: Client):
    source = 'import torch\nimport torch.nn as nn\n\n\nclass Wide(nn.Module):\n    def forward(self, x):\n        return x * 2  # ×2 😋\n'
    uri = open_file(client, "wide.py", source)
    action = next(a for a in await actions_at(client, uri, 4) if a.title.startswith("Add example inputs"))
    edits = action.edit.changes[uri]  # no documentChanges support: plain changes
    new = apply_text_edits(source, edits, "utf-8")
    assert new.startswith(source.rstrip("\n")) and "# ×2 😋\n\n\ndef get_inputs():" in new
    from drtriton.problem import from_source

    assert from_source(new, "Wide").inputs_fn == "get_inputs"
