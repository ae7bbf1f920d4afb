"""Timing's defences, piece by piece on the CPU (the whole of it runs in test_verifier_gpu):
new inputs for every timed call with some calls repeated, the random pick of timed outputs to
compare, the judgement of repeated calls' times, launch signatures with integer arguments."""

import random

import pytest
import torch

from drtriton.problem import from_source
from drtriton.verify.verdict import Timing, launched_kernel
from drtriton.verify.worker.guard import PatchDetector, launch_signature
from drtriton.verify.worker.harness import MIN_REPLAYS, TimedChecks, TimedInputs, _into_buffers, remembers_results
from drtriton.verify.worker.runtime import ProblemRuntime
from verifier_cases import RELU


@pytest.fixture
def relu_runtime(tmp_path):
    return ProblemRuntime(from_source(RELU, name="relu").to_dict(), "cpu", str(tmp_path), 1, training=False)


def test_timed_inputs_are_new_every_call_except_the_repeats(relu_runtime):
    timed = TimedInputs(relu_runtime, random.Random(0), calls=40)
    assert len(timed.replays) >= MIN_REPLAYS + 1 and 0 not in timed.replays
    calls = [timed.next(i)[0] for i in range(40)]
    for i, x in enumerate(calls[1:], start=1):
        if i in timed.replays:  # the previous call's values, in the same tensor or a copy
            assert torch.equal(x, calls[i - 1]) and timed.seeds[i] == timed.seeds[i - 1]
        else:
            assert not torch.equal(x, calls[i - 1]) and timed.seeds[i] != timed.seeds[i - 1]
    kinds = {calls[i] is calls[i - 1] for i in timed.replays}
    assert kinds == {True, False} or len(timed.replays) < 4  # both identity and content repeats


def test_timed_checks_pick_about_the_share_and_copy_at_once():
    checks = TimedChecks(random.Random(1), calls=100, budget_bytes=1 << 30)
    out = torch.ones(3)
    for i in range(100):
        checks.offer(i, seed=i, out=out)
    assert 3 <= len(checks.kept) <= 25
    out.fill_(5.0)  # a result finished later is not what is compared
    assert all(torch.equal(kept[2][0], torch.ones(3)) for kept in checks.kept)
    few = TimedChecks(random.Random(2), calls=30, budget_bytes=1 << 30)
    assert few.share > 0.2  # short timing runs check a larger share


def test_timed_checks_keep_one_output_whatever_the_budget():
    checks = TimedChecks(random.Random(3), calls=10, budget_bytes=8)
    checks.share = 1.0
    for i in range(10):
        checks.offer(i, i, torch.ones(100))
    assert len(checks.kept) == 1


def test_repeated_calls_much_faster_than_new_inputs_mean_cached_results():
    fresh = Timing.from_samples([1.0, 1.1, 0.9, 1.0, 1.05])
    assert "seen before" in remembers_results(fresh, [0.05, 0.06, 0.04, 0.05])
    assert remembers_results(fresh, [0.95, 1.0, 1.1, 0.9]) == ""  # honest: the same time
    assert remembers_results(fresh, [0.05, 0.05]) == ""  # too few to judge
    tiny = Timing.from_samples([0.012] * 5)
    assert remembers_results(tiny, [0.004] * 5) == ""  # within launch noise


def test_rechecks_write_new_values_without_touching_the_version_counter():
    old = torch.zeros(4)
    version, ptr = old._version, old.data_ptr()
    [same] = _into_buffers([torch.ones(4)], [old])
    assert same is old and torch.equal(old, torch.ones(4))
    assert old._version == version and old.data_ptr() == ptr  # a cache keyed on these is stale


def test_launch_signatures_hold_the_grid_and_the_integer_arguments():
    class Kernel:  # what the launch wrappers see: a JITFunction-like object
        fn = staticmethod(lambda: None)
    Kernel.fn.__name__ = "relu_kernel"
    x = torch.empty(3)
    sig = launch_signature(Kernel(), (x, x, 6144, 0.5, True), {"grid": (6,), "warmup": False, "BLOCK": 1024})
    assert sig == "relu_kernel[6](6144,True,BLOCK=1024)"
    assert launched_kernel(sig) == "relu_kernel"
    assert launch_signature(Kernel(), (x, 7), {"grid": lambda meta: (1,)}) == "relu_kernel(7)"
    assert launched_kernel("relu_kernel(7)") == "relu_kernel"


def test_patch_detector_sees_replaced_torch_functions_settings_and_global_hooks():
    from torch.nn.modules import module

    detector = PatchDetector()
    assert detector.changed() == []
    original = torch.nn.functional.gelu
    torch.nn.functional.gelu = lambda x: x
    try:
        assert "torch.nn.functional.gelu" in detector.changed()
    finally:
        torch.nn.functional.gelu = original
    handle = module.register_module_forward_pre_hook(lambda m, a: None)
    try:
        assert any("global module hooks" in c for c in detector.changed())
    finally:
        handle.remove()
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    try:
        assert any("PyTorch settings" in c for c in detector.changed())
    finally:
        torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    assert detector.changed() == []


def test_the_reference_worker_judges_picked_timed_calls_in_one_request(tmp_path, relu_runtime):
    """What the candidate returned in timed calls, against the reference on the same seeds:
    right outputs pass, a wrong one is named by its call."""
    from drtriton.verify.worker import transfer
    from drtriton.verify.worker.harness import ReferenceHarness

    settings = {"device": "cpu", "scratch": str(tmp_path)}
    harness = ReferenceHarness(settings)
    problem = from_source(RELU, name="relu")
    prep = harness.handle({"op": "prepare", "key": "k", "problem": problem.to_dict(), "device": "cpu",
                           "init_seed": 1, "training": False, "probe_seed": 5})
    assert prep["ok"], prep
    calls = []
    for call, seed in enumerate((11, 12, 13)):
        x, _ = relu_runtime.make_inputs(seed, fingerprinted=False)
        out = torch.relu(x[0]) if call != 2 else torch.relu(x[0]) + 1.0  # call 2 was wrong
        calls.append({"call": call, "seed": seed, "files": [transfer.share(out, str(tmp_path))]})
    reply = harness.handle({"op": "check_timed", "key": "k", "calls": calls})
    assert reply["ok"] and [r["passed"] for r in reply["results"]] == [True, True, False]
    assert reply["results"][2]["call"] == 2 and not harness.outputs  # nothing left behind
