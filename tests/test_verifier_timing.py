"""Timing's defences, piece by piece on the CPU (the whole of it runs in test_verifier_gpu):
new inputs for every timed call with some calls repeated, the random pick of timed outputs to
compare, the judgement of repeated calls' times, launch signatures with integer arguments."""

import random

import pytest
import torch

from drtriton.problem import from_source
from drtriton.verify.verdict import Timing, launched_kernel
from drtriton.verify.worker.guard import PatchDetector, launch_record, launch_signature, launch_signatures
from drtriton.verify.worker.harness import (MIN_REPLAYS, TimedChecks, TimedInputs, _copy_keeping_layout, _into_buffers,
                                             confirmed_timing, remembers_results)
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
            assert x.stride() == calls[i - 1].stride()
        else:
            assert not torch.equal(x, calls[i - 1]) and timed.seeds[i] != timed.seeds[i - 1]
    kinds = {calls[i] is calls[i - 1] for i in timed.replays}
    assert kinds == {True, False} or len(timed.replays) < 4  # both identity and content repeats


def test_a_repeated_call_follows_the_same_host_work_as_a_new_one(relu_runtime, monkeypatch):
    # inputs are made before every call, repeated or not: a repeat after less work ran faster on a
    # busy host (its caches warmer), which the replay check took for remembered results
    made = []
    make = relu_runtime.make_inputs
    monkeypatch.setattr(relu_runtime, "make_inputs", lambda *a, **k: made.append(1) or make(*a, **k))
    timed = TimedInputs(relu_runtime, random.Random(0), calls=40)
    for i in range(40):
        timed.next(i)
    assert len(timed.replays) >= MIN_REPLAYS + 1 and len(made) == 40


def test_short_or_lean_timing_runs_repeat_nothing(relu_runtime):
    assert TimedInputs(relu_runtime, random.Random(0), calls=5).replays == set()
    lean = TimedInputs(relu_runtime, random.Random(0), calls=100, replays=False)
    lean.next(0)
    assert lean.replays == set() and lean.previous is None  # no second set held


def test_a_content_copy_keeps_a_strided_layout():
    base = torch.randn(8, 6)
    view = base[:, 1:5]  # not contiguous
    copy = _copy_keeping_layout(view)
    assert torch.equal(copy, view) and copy.stride() == view.stride()
    assert copy.storage_offset() == view.storage_offset() and copy.data_ptr() != view.data_ptr()


def test_timed_checks_pick_about_the_share_and_copy_at_once():
    checks = TimedChecks(random.Random(1), calls=100)
    out = torch.ones(3)
    for i in range(100):
        checks.offer(i, seed=i, outputs=[out])
    assert 3 <= len(checks.kept) <= 25
    out.fill_(5.0)  # a result finished later is not what is compared
    assert all(torch.equal(kept[2][0][0], torch.ones(3)) and kept[2][0][1] is None for kept in checks.kept)
    few = TimedChecks(random.Random(2), calls=30)
    assert few.share > 0.2  # short timing runs check a larger share


def test_large_timed_outputs_are_kept_at_random_positions(monkeypatch):
    import drtriton.verify.worker.harness as harness

    monkeypatch.setattr(harness, "CHECK_ELEMENTS", 16)
    checks = TimedChecks(random.Random(3), calls=10)
    checks.share = 1.0
    big = torch.arange(1000, dtype=torch.float32)
    checks.offer(0, 0, [big])
    values, positions, shape = checks.kept[0][2][0]
    assert positions.shape == (16,) and torch.equal(values, big[positions]) and shape == [1000]


def test_repeated_calls_much_faster_than_new_inputs_mean_cached_results():
    fresh = Timing.from_samples([1.0, 1.1, 0.9, 1.0, 1.05])
    assert "seen before" in remembers_results(fresh, [0.05, 0.06, 0.04, 0.05])
    assert remembers_results(fresh, [0.95, 1.0, 1.1, 0.9]) == ""  # honest: the same time
    assert remembers_results(fresh, [0.05, 0.05]) == ""  # too few to judge
    tiny = Timing.from_samples([0.012] * 5)
    assert remembers_results(tiny, [0.004] * 5) == ""  # within launch noise


def test_a_round_that_looks_cached_is_timed_again_and_the_second_round_stands():
    """One round on a busy host can make an honest candidate's new inputs slow (CLIP vision in a
    bench, 1.5x); a cache makes every round. Calls 2, 5, 7 and 9 repeat inputs."""
    replays = {2, 5, 7, 9}
    def rounds(*candidate_times):
        made = iter(candidate_times)
        calls = []
        def time_round():
            calls.append(1)
            return {"candidate": (next(made), [0.0] * 10), "eager": ([1.0] * 10, [0.0] * 10)}
        return time_round, calls
    busy = [3.0 if k not in replays else 1.0 for k in range(10)]
    honest = [1.0] * 10
    time_round, calls = rounds(busy, honest)
    assert confirmed_timing(time_round, replays)[0]["candidate"][0] == honest and len(calls) == 2
    time_round, calls = rounds(busy, busy)  # a cache: the second round looks the same, and stands
    assert confirmed_timing(time_round, replays) == ({"candidate": (busy, [0.0] * 10), "eager": ([1.0] * 10, [0.0] * 10)},
                                                      True) and len(calls) == 2
    time_round, calls = rounds(honest)  # nothing suspicious: one round
    assert confirmed_timing(time_round, replays)[0]["candidate"][0] == honest and len(calls) == 1


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
    x, _ = relu_runtime.make_inputs(14, fingerprinted=False)
    positions = torch.randint(0, x[0].numel(), (100,))
    sampled = torch.relu(x[0]).reshape(-1)[positions]  # a large output, kept at random positions
    calls.append({"call": 3, "seed": 14, "files": [transfer.share(sampled, str(tmp_path))],
                  "indexes": [transfer.share(positions, str(tmp_path))], "shapes": [list(x[0].shape)]})
    # a shorter output (half the work done while timed), sampled only where it has values: its
    # samples agree, its shape does not
    x, _ = relu_runtime.make_inputs(15, fingerprinted=False)
    half = torch.relu(x[0]).reshape(-1)[: x[0].numel() // 2]
    positions = torch.randint(0, half.numel(), (100,))
    calls.append({"call": 4, "seed": 15, "files": [transfer.share(half[positions], str(tmp_path))],
                  "indexes": [transfer.share(positions, str(tmp_path))], "shapes": [list(half.shape)]})
    reply = harness.handle({"op": "check_timed", "key": "k", "calls": calls})
    assert reply["ok"] and [r["passed"] for r in reply["results"]] == [True, True, False, True, False]
    assert "shape" in reply["results"][4]["note"]
    assert reply["results"][2]["call"] == 2 and not harness.outputs  # nothing left behind
    assert reply["unchecked"] == 0 and not list(tmp_path.glob("*.bin"))


def test_after_the_autotuners_choose_again_only_their_grids_and_meta_parameters_may_change():
    from drtriton.verify.verdict import same_launches, untuned

    tuned = {"mm_kernel": ["BM", "BN"]}
    verified = ["mm_kernel[8,4](128,64,BM=64,BN=32,EVEN=True)", "relu_kernel[4](4096,BLOCK=1024)"]
    retuned = ["mm_kernel[4,4](128,64,BM=128,BN=32,EVEN=True)", "relu_kernel[4](4096,BLOCK=1024)"]
    assert untuned(retuned[0], tuned) == "mm_kernel(128,64,EVEN=True)" and untuned("k()", {"k": []}) == "k()"
    assert untuned(retuned[1], tuned) == retuned[1]  # not autotuned: as it is
    assert not same_launches(retuned, verified) and same_launches(retuned, verified, tuned=tuned)
    for other in (["mm_kernel[4,4](128,32,BM=128,BN=32,EVEN=True)", verified[1]],  # other sizes
                  ["mm_kernel[4,4](128,64,BM=128,BN=32,EVEN=False)", verified[1]],  # not a tuned parameter
                  [retuned[0], "relu_kernel[2](4096,BLOCK=2048)"],  # a kernel not tuned again
                  retuned[:1]):  # a launch left out
        assert not same_launches(other, verified, tuned=tuned)


def test_launch_records_keep_no_tensors_and_copy_a_grid_list():
    """A launch is recorded as what its signature needs, at the launch: later changes to a grid
    list cannot alter it, and no argument tensor stays alive in the record."""
    class Kernel:
        __name__ = "k"
    x, grid = torch.zeros(4), [3, 1]
    record = launch_record(Kernel(), (x, 7, 0.5, False), {"grid": grid, "warmup": False, "BLOCK": 64})
    grid[0] = 99
    assert not any(isinstance(v, torch.Tensor) for part in record[1:] for v in (part or ()))
    assert launch_signatures([record]) == ["k[3,1](7,False,BLOCK=64)"]


def test_every_timed_function_ends_after_a_device_wide_synchronize(monkeypatch):
    """The end event follows a synchronize of the whole device for each function alike: side-stream
    work counts, and eager pays the same wake-up as the candidate (whose call no longer syncs)."""
    from drtriton.verify.worker import timing

    log = []

    class FakeEvent:
        def __init__(self, **_):
            pass

    class FakeFlush:
        def zero_(self):
            log.append("flush")

    monkeypatch.setattr(timing, "_synchronize", lambda: log.append("sync"))
    monkeypatch.setattr(timing, "_record", lambda ev: log.append("record"))
    monkeypatch.setattr(timing, "_Event", FakeEvent)
    monkeypatch.setattr(timing, "_elapsed", lambda a, b: 1.0)
    monkeypatch.setattr(timing.torch, "empty", lambda *a, **k: FakeFlush())
    fns = {name: (lambda inputs, name=name: log.append(name)) for name in ("candidate", "eager")}
    timing.time_interleaved(fns, lambda name, i: [], trials=2, warmup=0)
    calls = [i for i, entry in enumerate(log) if entry in fns]
    assert len(calls) == 4
    for i in calls:  # start, the call, then sync before the end event, then sync to read it
        assert log[i - 1 : i + 4] == ["record", log[i], "sync", "record", "sync"]
