"""DirectLaunch (policy/launch.py): which launches go through Triton and which launch a kept
compiled kernel directly, and what a direct launch passes. Triton's own launch and the compiled
kernel are fakes here (no GPU); the GPU tests and `benchmarks/timed_call_overhead.py` run the
real ones."""

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import Autotuner, Config, JITFunction

from drtriton.policy.launch import DirectLaunch
from drtriton.verify.worker.guard import compiled_launch_record, launch_signatures


def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr = True):
    pass


class FakeCompiled:
    """What Triton's launch returns: a compiled kernel whose `run` launches it."""

    def __init__(self, log):
        self.log, self.function, self.packed_metadata = log, "function", "metadata"

    @property
    def run(self):
        return lambda *a: self.log.append(("direct", a[:3], a[3], a[9:]))


class FakeDriver:
    def __init__(self):
        self.device = 0

    def get_current_device(self):
        return self.device

    def get_current_stream(self, device):
        return f"stream{device}"


@pytest.fixture
def fakes(monkeypatch):
    log = []
    driver = FakeDriver()
    monkeypatch.setattr(triton.runtime.driver, "_active", driver)
    jit = JITFunction(scale_kernel)

    def triton_launch(*args, grid, warmup, **kwargs):
        log.append(("triton", grid, args, kwargs))
        return FakeCompiled(log)

    monkeypatch.setattr(jit, "run", triton_launch)
    return jit, log, driver


def test_a_signature_launches_through_triton_once_then_directly(fakes):
    jit, log, _ = fakes
    launch = DirectLaunch(jit)
    x, out = torch.zeros(64), torch.zeros(64)
    results = [launch[(4,)](x, out, 64, 0.5, BLOCK=16, num_warps=4) for _ in range(3)]
    assert [entry[0] for entry in log] == ["triton", "direct", "direct"]
    # the grid padded to three, the stream of the device, then every argument in order: the
    # constexpr given by keyword and the default one after the positional ones
    assert log[1][1:] == ((4, 1, 1), "stream0", (x, out, 64, 0.5, 16, True))
    assert results[1] is results[0]  # the compiled kernel, as Triton's path returns it


def test_what_triton_specialises_on_takes_triton_again(fakes):
    jit, log, _ = fakes
    launch = DirectLaunch(jit)
    x, out = torch.zeros(65), torch.zeros(64)
    launch[(4,)](x, out, 64, 1.0, BLOCK=16)
    launch[(4,)](x[1:], out, 64, 1.0, BLOCK=16)  # 4 bytes off Triton's 16-byte alignment
    launch[(4,)](x.double(), out, 64, 1.0, BLOCK=16)  # another dtype
    launch[(4,)](x, out, 48, 1.0, BLOCK=16)  # another integer
    launch[(4,)](x, out, 64, 1.0, BLOCK=32)  # another meta-parameter
    launch[(4,)](x, out, 64, 2.0, BLOCK=16)  # another float (a constexpr may take it)
    launch[(4,)](x, out, True, 1.0, BLOCK=16)  # True where 64 was: True and 1 compile differently
    launch[(4,)](x, out, 64, 1.0, EVEN=16)  # a keyword of another name
    assert [entry[0] for entry in log] == ["triton"] * 8
    launch[(4,)](x[1:], out, 64, 1.0, BLOCK=16)
    assert log[-1][0] == "direct"


def test_arguments_of_other_types_at_a_position_are_another_signature(fakes):
    """Which positions hold tensors is worked out once per tuple of argument types: a tensor
    where a number was, or a parameter (a tensor subclass), keys its own signature."""
    jit, log, _ = fakes
    launch = DirectLaunch(jit)
    x, out, w = torch.zeros(64), torch.zeros(64), torch.nn.Parameter(torch.zeros(64))
    for _ in range(2):
        launch[(4,)](x, out, 64, 1.0, BLOCK=16)
        launch[(4,)](x, out, x, 1.0, BLOCK=16)  # a tensor where 64 was
        launch[(4,)](w, out, 64, 1.0, BLOCK=16)  # a parameter where a tensor was
    assert [entry[0] for entry in log] == ["triton"] * 3 + ["direct"] * 3
    assert log[3][3][:3] == (x, out, 64) and log[4][3][:3] == (x, out, x) and log[5][3][0] is w
    assert len(launch.layouts) == 3
    launch.LIMIT = 3  # a site passing ever new types: the layouts start again, the launches go on
    launch[(4,)](x, out, 64.0, 1.0, BLOCK=16)
    assert len(launch.layouts) == 1 and log[-1][0] == "triton"


def test_a_tensor_given_by_keyword_always_takes_triton(fakes):
    """A direct launch keeps the keyword arguments in its tail: a tensor there would be the
    first call's on every later one."""
    jit, log, _ = fakes
    launch = DirectLaunch(jit)
    for _ in range(3):
        x, out = torch.zeros(64), torch.zeros(64)
        launch[(4,)](x, out_ptr=out, n=64, alpha=1.0, BLOCK=16)
    assert [entry[0] for entry in log] == ["triton"] * 3 and log[-1][3]["out_ptr"] is out


def test_what_cannot_be_part_of_a_signature_takes_triton(fakes):
    jit, log, _ = fakes
    launch = DirectLaunch(jit)
    x = torch.zeros(64)
    for _ in range(2):
        launch[(4,)](x, x, [64], 1.0, BLOCK=16)  # an unhashable argument
    for grid in ((4,), (4,), [4]):  # a list grid after a tuple one, for the same signature
        launch[grid](x, x, 64, 1.0, BLOCK=16)
    assert [entry[0] for entry in log] == ["triton", "triton", "triton", "direct", "triton"]


def test_another_device_takes_triton_and_a_grid_function_sees_every_argument(fakes):
    jit, log, driver = fakes
    launch = DirectLaunch(jit)
    x, out = torch.zeros(64), torch.zeros(64)
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]), meta["EVEN"] + 1)  # noqa: E731
    for _ in range(2):
        launch[grid](x, out, 64, 1.0, BLOCK=16)
    assert [entry[0] for entry in log] == ["triton", "direct"] and log[1][1] == (4, 2, 1)
    driver.device = 1
    launch[grid](x, out, 64, 1.0, BLOCK=16)
    assert log[-1][0] == "triton"


def test_an_autotuned_kernel_launches_its_chosen_configuration(fakes, monkeypatch):
    jit, log, _ = fakes
    tuner = Autotuner(jit, jit.arg_names, [Config({"BLOCK": 8}), Config({"BLOCK": 32}, num_warps=8)],
                      key=["n"], reset_to_zero=None, restore_value=None)

    def tuned(*args, grid, warmup, **kwargs):
        tuner.best_config = tuner.configs[1]
        return jit.run(*args, grid=grid, warmup=warmup, **kwargs, **tuner.best_config.all_kwargs())

    monkeypatch.setattr(tuner, "run", tuned)
    launch = DirectLaunch(tuner)
    x, out = torch.zeros(64), torch.zeros(64)
    for _ in range(2):
        launch[(2,)](x, out, 64, 1.0)
    assert [entry[0] for entry in log] == ["triton", "direct"]
    assert log[1][3] == (x, out, 64, 1.0, 32, True)


def test_a_configuration_with_a_pre_hook_always_takes_triton(fakes, monkeypatch):
    jit, log, _ = fakes
    tuner = Autotuner(jit, jit.arg_names, [Config({"BLOCK": 8}, pre_hook=lambda nargs: None)],
                      key=["n"], reset_to_zero=None, restore_value=None)

    def tuned(*args, grid, warmup, **kwargs):
        tuner.best_config = tuner.configs[0]
        return jit.run(*args, grid=grid, warmup=warmup, **kwargs, BLOCK=8)

    monkeypatch.setattr(tuner, "run", tuned)
    launch = DirectLaunch(tuner)
    x = torch.zeros(64)
    for _ in range(3):
        launch[(2,)](x, x, 64, 1.0)
    assert [entry[0] for entry in log] == ["triton"] * 3


def test_the_interpreter_is_left_to_triton():
    class Interpreted:  # not a JITFunction: launched as it is
        def __getitem__(self, grid):
            return lambda *args, **kwargs: ("launched", grid, args)

    assert DirectLaunch(Interpreted())[(3,)](1, 2) == ("launched", (3,), (1, 2))


def test_signatures_beyond_the_limit_are_not_kept(fakes):
    jit, log, _ = fakes
    launch = DirectLaunch(jit)
    launch.LIMIT = 2
    x = torch.zeros(64)
    for n in (1, 2, 3, 3, 3):
        launch[(1,)](x, x, n, 1.0, BLOCK=16)
    assert [entry[0] for entry in log] == ["triton"] * 5 and len(launch.launches) == 2


def test_a_direct_launch_is_recorded_as_its_jit_function_with_its_grid_and_integers(fakes):
    jit, _, _ = fakes

    class Compiled:
        class src:
            fn = jit

    x = torch.zeros(2)
    record = compiled_launch_record(Compiled(), (4, 1, 1), (x, x, 64, 0.5, 16, True))
    assert launch_signatures([record]) == ["scale_kernel[4](64,BLOCK=16,EVEN=True)"]


def test_the_recorder_sees_triton_s_launch_and_a_direct_one_alike(fakes):
    """On the GPU both reach the device through the compiled kernel's `run`: recorded there once
    each (not again by the `kernel[grid]` wrapper around it), the same way; an autotuner's
    benchmarking launches are not the call's; where no compiled kernel launched (the
    interpreter), the outermost wrapper records."""
    from drtriton.verify.worker.guard import LaunchRecorder

    jit, _, _ = fakes
    launched = []

    class Compiled:
        src = type("src", (), {"fn": jit})

        @property
        def run(self):
            return lambda *a: launched.append(a[:3])

    class Entry:  # JITFunction.run's shape: the compiled kernel's run inside
        def run(self, *args, grid, warmup, **kwargs):
            if not warmup:
                Compiled().run(grid[0], 1, 1, "stream", "f", "m", None, None, None, *args, *kwargs.values())

    class Interpreted:
        __name__ = "interpreted_kernel"

        def run(self, *args, grid, warmup, **kwargs):
            pass

    class Tuner:  # times its own kernel: those launches are not the call's; another's are
        fn = jit

        def _bench(self):
            Entry().run(torch.zeros(1), torch.zeros(1), 5, 1.0, grid=(9,), warmup=False, BLOCK=1)
            OtherEntry().run(torch.zeros(1), 6, grid=(3,), warmup=False)

    class Other(Compiled):
        src = type("src", (), {"fn": Interpreted()})

    class OtherEntry:
        def run(self, *args, grid, warmup, **kwargs):
            Other().run(grid[0], 1, 1, "stream", "f", "m", None, None, None, *args)

    recorder = LaunchRecorder()
    for cls in (Entry, Interpreted):
        recorder._wrap(cls)
    recorder._wrap_compiled(Compiled)
    recorder._wrap_benchmarking(Tuner)
    x = torch.zeros(4)
    recorder.begin_call()
    Entry().run(x, x, 64, 1.0, grid=(2,), warmup=False, BLOCK=16)
    Compiled().run(2, 1, 1, "stream", "f", "m", None, None, None, x, x, 64, 1.0, 16)
    Entry().run(x, x, 64, 1.0, grid=(2,), warmup=True, BLOCK=16)
    assert not recorder.benchmarked
    Tuner()._bench()
    assert recorder.benchmarked
    Interpreted().run(x, 3, grid=(1,), warmup=False)
    assert launch_signatures(recorder.end_call()) == ["scale_kernel[2](64,BLOCK=16)"] * 2 + \
        ["interpreted_kernel[3](6)", "interpreted_kernel[1](3)"]
    assert len(launched) == 4  # the tuned kernel's benchmarking launch ran, unrecorded


def test_generated_modules_launch_directly_except_taught_ones():
    """The built-in policy wraps the kernels forward launches (not a helper only kernels call)
    in _DirectLaunch, at the end of the module; training data asks for modules without it (launch plumbing, no kernel
    knowledge)."""
    from drtriton.capture import capture_module
    from drtriton.policy.builtin import BuiltinPolicy
    from drtriton.problem import from_source
    from drtriton.verify.static import check_source

    src = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.special.chebyshev_polynomial_t(x, 3).sum(dim=-1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''
    problem = from_source(src, "Model", name="j0")
    namespace: dict = {}
    exec(src, namespace)
    with torch.device("meta"):
        graph = capture_module(namespace["Model"](), namespace["get_inputs"]())
    direct = next(iter(BuiltinPolicy("cpu").candidates(problem, graph, "strict"))).source
    plain = next(iter(BuiltinPolicy("cpu", direct_launch=False).candidates(problem, graph, "strict"))).source
    assert direct.count("class _DirectLaunch") == 1 and "_DirectLaunch" not in plain
    # the launcher and the wrapping come last: a reader finds the kernels and the class first
    wrapped = [line for line in direct.splitlines() if "= _DirectLaunch(" in line]
    assert wrapped == ["chebyshev_polynomial_t_sum_kernel = _DirectLaunch(chebyshev_polynomial_t_sum_kernel)"]
    assert direct.index("class ModelNew") < direct.index("class _DirectLaunch") < direct.index(wrapped[0])
    assert direct.rstrip().endswith(wrapped[-1])  # not the helper the kernel calls
    report = check_source(direct, ["ModelNew"], "Model")
    assert report.ok, report.errors
    assert report.kernels == ["_chebyshev_polynomial_t", "chebyshev_polynomial_t_sum_kernel"]
