import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(Path(__file__).parent))


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
