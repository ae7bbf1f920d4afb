"""The GPU worker compiles a candidate's kernels on a thread pool (drtriton/verify/worker/
parallel_compile.py): every kernel ahead of the first call, by a forward of its own copy on the
meta device, and an autotuned kernel's configurations before its first tuning. Tuning itself
needs a GPU (tests/test_verifier_gpu.py verifies autotuned candidates through all of it); here,
what the CPU can show: the pool's threads all exist before any candidate runs (the sandbox counts
threads across a candidate's calls), single-configuration kernels run as before, the ahead pass
touches nothing real, and no launch launches while it runs."""

import subprocess
import sys

import torch

SCRIPT = r'''
import _thread, torch, triton, triton.language as tl
from drtriton.verify.worker import parallel_compile
before = _thread._count()
assert parallel_compile.install(3) and parallel_compile.install(3)  # once
started = _thread._count()

@triton.autotune(configs=[triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) * 2, mask=o < n)

x = torch.randn(100)
y = torch.empty_like(x)
double[lambda m: (triton.cdiv(100, m["BLOCK"]),)](x, y, 100)
print(started - before, _thread._count() - started, torch.equal(y, x * 2))
'''


def test_threads_start_at_install_and_one_configuration_runs_as_before():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                         env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["3", "0", "True"]


CACHING = """
import torch
import torch.nn as nn

_CACHE = []


class Caching(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)  # training mode: a real call would move its statistics

    def forward(self, x):
        _CACHE.append(x.shape)
        return self.bn(x) * 2
"""


def _build_from_own_import(tmp_path, name):
    from drtriton.verify.worker.runtime import import_source

    def build():
        with torch.device("meta"):
            return import_source(CACHING, name, str(tmp_path)).Caching()
    return build


def test_compiling_ahead_runs_its_own_copy_on_the_meta_device_and_touches_nothing_real(tmp_path):
    from triton.runtime.jit import KernelInterface

    from drtriton.verify.worker.parallel_compile import compile_ahead
    from drtriton.verify.worker.runtime import import_source

    launch = KernelInterface.__getitem__
    real_module = import_source(CACHING, "caching_real", str(tmp_path))
    model = real_module.Caching()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert compile_ahead(_build_from_own_import(tmp_path, "caching_ahead"), [torch.randn(8, 4)]) == ""
    assert real_module._CACHE == []  # the module's globals: untouched (row 5's cache stays empty)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert KernelInterface.__getitem__ is launch  # launches are launches again


class _ReadsAValue(torch.nn.Module):
    def forward(self, x):
        return x[: int(x.sum().item()) % 3 + 1]


def test_a_forward_that_reads_a_value_stops_compiling_ahead_with_the_reason():
    from drtriton.verify.worker.parallel_compile import compile_ahead

    def build():
        with torch.device("meta"):
            return _ReadsAValue()

    stopped = compile_ahead(build, [torch.randn(8, 4)])
    assert stopped.startswith("RuntimeError") and "meta" in stopped, stopped


def test_a_constructor_that_cannot_run_on_meta_is_reported():
    from drtriton.verify.worker.parallel_compile import compile_ahead

    def build():
        raise ValueError("reads a tensor value")

    assert compile_ahead(build, []).startswith("no copy on the meta device (ValueError")


def test_no_way_to_a_launch_launches_while_compiling_ahead(monkeypatch):
    # a launch on meta tensors would fault the CUDA context: launchers bound in the constructor
    # and direct `.run(warmup=False)` calls compile only, like `kernel[grid](...)`
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    from drtriton.verify.worker.parallel_compile import compile_ahead

    seen = []

    def stub(kernel, *args, grid=None, warmup=False, **kwargs):
        seen.append(warmup)

    monkeypatch.setattr(JITFunction, "run", stub)

    @triton.jit
    def touch(x_ptr):
        tl.store(x_ptr, 1.0)

    class Bound(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.launch = touch[(1,)]

        def forward(self, x):
            self.launch(x)
            touch.run(x, grid=(1,), warmup=False)
            return x

    def build():
        with torch.device("meta"):
            return Bound()

    assert compile_ahead(build, [torch.zeros(4)]) == ""
    assert seen == [True, True]
    assert JITFunction.run is stub  # restored


def test_each_worker_compiles_with_its_share_of_the_host(tmp_path):
    """Twelve workers on 32 cores asked 96 compile threads (8 each) and compiled at half speed:
    a worker takes the share its pool gives it, 1 to 8 threads."""
    import json

    from drtriton.verify.pool import PoolSettings, Worker
    from drtriton.verify.verifier import compile_threads_for

    assert compile_threads_for(12, cores=32) == 2 and compile_threads_for(1, cores=32) == 8
    assert compile_threads_for(64, cores=16) == 1 and compile_threads_for(0, cores=4) == 4
    # the pool hands the share to each worker it starts, with the worker's other settings
    worker = Worker("candidate", PoolSettings("cpu", compile_threads=3), str(tmp_path), str(tmp_path))
    try:
        environ = open(f"/proc/{worker.proc.pid}/environ", "rb").read().split(b"\0")
        (settings,) = [e for e in environ if e.startswith(b"DRTRITON_WORKER_SETTINGS=")]
        assert json.loads(settings.split(b"=", 1)[1])["compile_threads"] == 3
    finally:
        worker.close()


def test_a_verifier_shares_the_host_among_every_gpus_workers(monkeypatch):
    """`bench --gpus all` builds a verifier per GPU with host_workers = workers x GPUs."""
    import pytest

    from drtriton.verify import Verifier, VerifyConfig

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(32)), raising=False)
    for config, threads in ((VerifyConfig(device="cpu", workers=6), 5),
                            (VerifyConfig(device="cpu", workers=6, host_workers=12), 2),
                            (VerifyConfig(device="cpu", workers=6, compile_threads=7), 7)):
        verifier = Verifier(config)
        try:
            assert verifier.pool.settings.compile_threads == threads, config
        finally:
            verifier.close()
    with pytest.raises(ValueError, match="compile_threads"):
        VerifyConfig(compile_threads=-1)
