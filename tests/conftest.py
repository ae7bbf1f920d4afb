import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(Path(__file__).parent))


# pytest-xdist (`-n auto` in pyproject.toml) spreads single tests over the workers, except the
# tests of these modules: they share a module-scoped fixture (an editor, a language server, a
# tiny model) that takes seconds to set up, so each module runs on one worker. Collection checks
# the list against the fixtures the tests really use.
ONE_WORKER_MODULES = {
    "test_editors_nvim", "test_editors_vscode", "test_models", "test_ops_coverage", "test_ops_triton",
    "test_polynomials", "test_server", "test_server_utf8", "test_synth_programs", "test_training",
    "test_verifier_gpu",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """One worker per core, at most 4 (each holds torch, Triton and two verifier workers)."""
    return max(1, min(len(os.sched_getaffinity(0)), 4))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixturesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if Path(module).stem in ONE_WORKER_MODULES else nodeid

    return SharedFixturesTogether(config, log)


def pytest_collection_modifyitems(config, items):
    shared = {item.module.__name__ for item in items if _uses_module_fixture(item)}
    if shared - ONE_WORKER_MODULES:
        raise pytest.UsageError(f"tests/conftest.py: add {sorted(shared - ONE_WORKER_MODULES)} to "
                                "ONE_WORKER_MODULES (they use module-scoped fixtures)")


def _uses_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope in ("package", "module", "class") for chain in defs for d in chain)


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="session")
def cpu_verifier():
    """One verifier for the session: workers are slow to start and meant to be reused."""
    from drtriton.verify import Verifier, VerifyConfig

    v = Verifier(VerifyConfig(device="cpu", workers=2, timeout_s=60))
    yield v
    v.close()


@pytest.fixture(scope="session")
def kernelbench_dir() -> Path:
    path = SHARED / "data" / "kernelbench"
    if not path.is_dir():
        pytest.skip(f"KernelBench data not found at {path}")
    return path
